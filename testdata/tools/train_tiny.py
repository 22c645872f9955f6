#!/usr/bin/env python3
"""Train a small DiffusionGemma checkpoint on the King James Bible with Hugging Face transformers, and
write it (bf16, laid out as a hub cache entry) together with float32 and float64 reference scenarios on
held-out text.

Provenance: written for issue 13 (a trained fixture: random weights are chaotic under rounding). The corpus
is the Debian package bible-kjv-text 4.38 (public domain text); testdata/trained/PROVENANCE.md gives the
exact extraction command and the held-out split (every 25th chapter). Runs where torch + transformers 5.17
(models/diffusion_gemma) + tokenizers + safetensors are installed, a CUDA GPU for the training (the
project's GPU machine: one H200), from the repository root:

    PYTHONUNBUFFERED=1 python3 testdata/tools/train_tiny.py --corpus .device/corpus/train.txt \\
        --heldout testdata/trained/heldout.txt --out /tmp/out --budget 420 [--fixtures] [--ship $OUT]

testdata/trained was made with --budget 475 --batch 512 --lr 2e-3 --impl sdpa/None --log-every 200
--eval-every 1000 (exact command, log summary and results: testdata/trained/PROVENANCE.md).

What it does:
  1. trains a Gemma-style BPE tokenizer (hf_fixture.write_tiny_tokenizer, vocab 2048) on the training text
     and turns the training and held-out text into token streams (one chapter per line, lines joined by a
     space);
  2. builds the model from hf_fixture.build_config(VARIANT) with transformers' default init and trains it
     in float32 (TF32 matmuls) with AdamW, linear warmup and a cosine decay over the time budget
     (--budget seconds) on the block-diffusion objective of the sampler (docs/model-spec.md section 4):
     a batch of windows = a clean prefix (<bos> + text, length uniform in [16, 96], one length per batch)
     followed by a block of C clean tokens; every canvas position is replaced by a uniform random id in
     [0, V) with probability r, r ~ U(0, 1) per sample; with probability 0.5 the decoder first runs once
     without gradients on the corrupted canvas and its logits divided by T ~ U(t_min, t_max) are passed as
     self_conditioning_logits to the trained pass; the loss is the cross-entropy of the decoder logits
     against the clean block (all C positions). The encoder (prefix) runs with gradients, so they flow
     through the KV cache. A Switch-style load-balancing loss (0.01) is switched on only if a router
     collapses (an expert with < 1% or > 50% of the routed slots in some layer);
  3. saves the model in bf16 exactly as hf_fixture does (save_pretrained, a few shards,
     generation_config.json = GEN_CONFIG with max_new_tokens 64, tokenizer files) laid out as a hub cache
     under OUT/trained/hub (repo dgq-test/diffusiongemma-trained);
  4. reloads the snapshot (bf16 -> float32, eager attention, CPU) and computes hf_fixture's reference
     scenarios with ids taken from held-out text (prompt = <bos> + 44 tokens of a held-out chapter,
     canvas1/canvas2 = the next block corrupted at noise 0.3/0.6, block1 = the clean next block,
     canvas3 = the block after it corrupted at noise 1.0); float32 tensors under their plain names and the
     same scenario in float64 (eager attention, eager experts) under f64/<name>, plus f64/logits2_refsc
     (float64 step 2 conditioned on the stored float32 sc2_logits), in one reference.safetensors, with
     reference.json ("variant": "trained");
  5. reports held-out loss and the router margin distribution (per MoE layer, the gap between the k-th and
     (k+1)-th router probability on held-out windows) and samples a few generations with transformers'
     own generate from held-out prompts (OUT/metrics.json, OUT/samples.json);
  6. with --fixtures, runs runtime/testdata/hf_float64.py for the existing fixtures and writes
     OUT/fixtures/f64add_<fixture>.safetensors: the float64 tensors f64/<name> to add to each fixture's
     reference (the f64/ names of hf_float64.py, f64/logits2_refsc included, plus f64/step1_entropy, the
     entropy of f64/sc2_logits).
With --ship DIR, OUT is packed into DIR/trained.tgz and DIR/fixtures.tgz at the end, whatever failed.
"""
import argparse, json, math, os, re, shutil, subprocess, sys, tarfile, tempfile, time, traceback

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_fixture as hf  # noqa: E402
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache  # noqa: E402

REPO = "dgq-test/diffusiongemma-trained"   # --repo overrides
VARIANT = dict(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=8,
               layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
                            "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
               num_attention_heads=4, num_key_value_heads=2, head_dim=32,
               global_head_dim=64, num_global_key_value_heads=1, sliding_window=32,
               num_experts=8, top_k_experts=2, moe_intermediate_size=64,
               canvas_length=32, prompt_len=45)
GEN = dict(hf.GEN_CONFIG, max_new_tokens=64)
NOISE = {"canvas1_ids": 0.3, "canvas2_ids": 0.6, "canvas3_ids": 1.0}
REF_LINE = 41          # 0-based line of heldout.txt the reference scenario reads (Romans 4)
GEN_LINES = [0, 19, 41, 44, 46]   # held-out chapters whose openings prompt the sample generations
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def stage(name, fn, *a, **k):
    log(f"== {name}")
    try:
        return fn(*a, **k)
    except Exception:
        log(f"!! stage {name} FAILED")
        traceback.print_exc()
        sys.stdout.flush()
        return None


# ---------------------------------------------------------------- data

def tokenize(tok_path, path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    lines = [l for l in open(path, encoding="utf-8").read().split("\n") if l.strip()]
    encs = tok.encode_batch([l + " " for l in lines], add_special_tokens=False)
    per_line = [e.ids for e in encs]
    stream = torch.tensor([i for ids in per_line for i in ids], dtype=torch.long)
    return tok, per_line, stream


def windows(stream, B, P, C, gen, device):
    """B windows: <bos> + P-1 text tokens of prefix, then C clean canvas tokens."""
    n = stream.numel() - (P - 1 + C)
    o = torch.randint(0, n, (B,), generator=gen)
    idx = o[:, None] + torch.arange(P - 1 + C)[None]
    w = stream[idx]
    prefix = torch.cat([torch.full((B, 1), 2, dtype=torch.long), w[:, :P - 1]], 1)
    return prefix.to(device), w[:, P - 1:].to(device)


def corrupt(clean, rate, V, gen):
    """rate: float or [B] tensor; each position -> uniform id in [0, V) with that probability."""
    B, C = clean.shape
    r = rate if torch.is_tensor(rate) else torch.full((B,), float(rate))
    mask = torch.rand(B, C, generator=gen) < r[:, None]
    noise = torch.randint(0, V, (B, C), generator=gen)
    return torch.where(mask.to(clean.device), noise.to(clean.device), clean)


# ---------------------------------------------------------------- router tap

class RouterTap:
    """Recomputes the router probabilities (docs/model-spec.md 3.4) from each router module's input:
    softmax((RMSNorm_noscale(x) * scale * H^-1/2) @ proj^T), float32."""

    def __init__(self, model, k, eps):
        self.k, self.eps, self.mode, self.rec, self.checked = k, eps, None, {}, None
        self.handles = []
        for name, m in model.named_modules():
            if name.split(".")[-1] == "router" and hasattr(m, "proj") and hasattr(m, "scale"):
                self.handles.append(m.register_forward_hook(self._hook(name), with_kwargs=True))
        self.names = []

    def _hook(self, name):
        def hook(mod, args, kwargs, out):
            if self.mode is None:
                return
            x = args[0] if args else next(v for v in kwargs.values() if torch.is_tensor(v))
            x = x.reshape(-1, x.shape[-1]).float()
            xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            r = xn * mod.scale.float() * (x.shape[-1] ** -0.5)
            p = (r @ mod.proj.weight.float().t()).softmax(-1)
            if self.checked is None:  # does our recomputation pick the experts the module picked?
                idx = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                       if torch.is_tensor(o) and not o.is_floating_point()]
                if idx and idx[0].numel() == p.shape[0] * self.k:
                    mine = p.topk(self.k, -1).indices.sort(-1).values
                    theirs = idx[0].reshape(p.shape[0], self.k).sort(-1).values
                    self.checked = (mine == theirs).all(-1).float().mean().item()
                else:
                    self.checked = "router output: " + repr([(type(o).__name__, tuple(o.shape) if torch.is_tensor(o) else None)
                                                             for o in (out if isinstance(out, (tuple, list)) else [out])])
            if self.mode == "eval":
                p = p.detach()
            self.rec.setdefault(name, []).append(p)
        return hook

    def take(self):
        r, self.rec = self.rec, {}
        return r


def margins(probs, k):
    top = probs.topk(k + 1, -1).values
    return top[:, k - 1] - top[:, k]


def qstats(m):
    m = m.double().flatten().cpu()
    q = lambda x: torch.quantile(m, x).item() if m.numel() < 16_000_000 else m.sort().values[int(x * (m.numel() - 1))].item()
    return {"n": m.numel(), "min": m.min().item(), "p1": q(0.01), "p10": q(0.10), "median": q(0.5),
            "below_1e-3": int((m < 1e-3).sum()), "below_1e-6": int((m < 1e-6).sum())}


def short(name):
    return name.replace("model.decoder.layers.", "dec.").replace("model.encoder.language_model.layers.", "enc.").replace(".router", "")


# ---------------------------------------------------------------- model

def load(path, dtype, attn, experts, device="cpu"):
    kw = {"experts_implementation": experts} if experts else {}
    m = DiffusionGemmaForBlockDiffusion.from_pretrained(path, dtype=dtype, attn_implementation=attn, **kw)
    return m.to(device).eval()


def train_loss(model, prefix, clean, V, gen, sc_prob, t_min, t_max):
    B = clean.shape[0]
    noisy = corrupt(clean, torch.rand(B, generator=gen), V, gen)
    cache = DynamicCache(config=model.config.text_config)
    eo = model.model.encoder(input_ids=prefix, past_key_values=cache)
    sc = None
    if torch.rand(1, generator=gen).item() < sc_prob:
        with torch.no_grad():
            tap_mode = TAP.mode if TAP else None
            if TAP: TAP.mode = None
            z = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values).logits
            if TAP: TAP.mode = tap_mode
            T = t_min + (t_max - t_min) * torch.rand(B, generator=gen)
            sc = (z / T.to(z.device)[:, None, None]).detach()
    out = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values, self_conditioning_logits=sc)
    return F.cross_entropy(out.logits.reshape(-1, V).float(), clean.reshape(-1))


TAP = None


@torch.no_grad()
def eval_loss(model, stream, V, C, device, seed=7, B=128, P=48):
    g = torch.Generator().manual_seed(seed)
    prefix, clean = windows(stream, B, P, C, g, device)
    res = {}
    cache = DynamicCache(config=model.config.text_config)
    eo = model.model.encoder(input_ids=prefix, past_key_values=cache)
    for rate in (0.3, 0.6, 1.0):
        noisy = corrupt(clean, rate, V, g)
        z = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values).logits
        res[f"r{rate}"] = F.cross_entropy(z.reshape(-1, V).float(), clean.reshape(-1)).item()
        z2 = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values,
                   self_conditioning_logits=z / 0.6).logits
        res[f"r{rate}_sc"] = F.cross_entropy(z2.reshape(-1, V).float(), clean.reshape(-1)).item()
        res[f"r{rate}_sc_acc"] = (z2.argmax(-1) == clean).float().mean().item()
    return res


def train(a, init_dir, tr_stream, ho_stream, V, C, device, metrics):
    global TAP
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    g = torch.Generator().manual_seed(a.seed)
    cands = [("sdpa", None), ("sdpa", "eager"), ("eager", "eager")]
    if a.impl != "auto":  # "ATTN/EXPERTS", EXPERTS "None" for the default experts path
        at, ex = a.impl.split("/")
        cands = [(at, None if ex == "None" else ex)]
    best, timing = None, {}
    for attn, experts in cands:  # pick the fastest implementation that trains
        try:
            m = load(init_dir, torch.float32, attn, experts, device)
            grab = {}
            layer0 = m.model.encoder.language_model.layers[0]
            def pre(mod, args, kwargs):
                for t in list(args) + list(kwargs.values()):
                    if torch.is_tensor(t) and t.is_floating_point() and t.requires_grad:
                        t.retain_grad(); grab["h"] = t; break
            h = layer0.register_forward_pre_hook(pre, with_kwargs=True)
            ts = []
            for i in range(4):
                torch.cuda.synchronize(); t = time.time()
                prefix, clean = windows(tr_stream, a.batch, 64, C, g, device)
                loss = train_loss(m, prefix, clean, V, g, 1.0 if i % 2 else 0.0, GEN["t_min"], GEN["t_max"])
                loss.backward()
                torch.cuda.synchronize(); ts.append(time.time() - t)
                if i == 0:
                    gh = grab.get("h")
                    metrics.setdefault("encoder_grad_norm", {})[f"{attn}/{experts}"] = (
                        gh.grad.norm().item() if gh is not None and gh.grad is not None else None)
                    h.remove()
                m.zero_grad(set_to_none=True)
            timing[f"{attn}/{experts}"] = min(ts[1:])
            log(f"probe attn={attn} experts={experts}: loss {loss.item():.3f}, step {min(ts[1:]) * 1e3:.0f} ms,"
                f" encoder input grad norm {metrics['encoder_grad_norm'][f'{attn}/{experts}']}")
            if best is None or timing[f"{attn}/{experts}"] < timing[f"{best[0]}/{best[1]}"]:
                best = (attn, experts)
            del m
        except Exception:
            log(f"probe attn={attn} experts={experts} failed")
            traceback.print_exc()
    metrics["probe_step_s"] = timing
    assert best is not None, "no implementation trains"
    log("training with", best)
    metrics["train_impl"] = list(best)
    model = load(init_dir, torch.float32, best[0], best[1], device)
    K, E = VARIANT["top_k_experts"], VARIANT["num_experts"]
    TAP = RouterTap(model, K, model.config.text_config.rms_norm_eps)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "vision" not in n]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2 and "vision" not in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    t_start, step, aux_on, hist = time.time(), 0, False, []
    while True:
        el = time.time() - t_start
        if el >= a.budget:
            break
        frac = min(1.0, el / a.budget)
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        logstep = step % a.log_every == 0
        TAP.mode = "train" if (aux_on or logstep) else None
        P = int(torch.randint(16, 97, (1,), generator=g))
        prefix, clean = windows(tr_stream, a.batch, P, C, g, device)
        loss = train_loss(model, prefix, clean, V, g, 0.5, GEN["t_min"], GEN["t_max"])
        rec = TAP.take()
        TAP.mode = None
        total = loss
        loads = {}
        if rec:
            aux = 0.0
            for name, ps in rec.items():
                pr = torch.cat(ps)
                f = F.one_hot(pr.topk(K, -1).indices, E).sum(1).float().mean(0) / K
                loads[name] = f.detach()
                aux = aux + E * (f.detach() * pr.mean(0)).sum()
            if aux_on:
                total = loss + 0.01 * aux / len(rec)
        opt.zero_grad(set_to_none=True)
        total.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        li = loss.item() if logstep else None
        if logstep:
            lo = min(v.min().item() for v in loads.values()) if loads else float("nan")
            hi = max(v.max().item() for v in loads.values()) if loads else float("nan")
            if not aux_on and step >= 100 and loads and (lo < 0.01 or hi > 0.5):
                aux_on = True
                metrics["aux_loss_switched_on_at_step"] = step
                log(f"router collapse (expert load min {lo:.4f} max {hi:.4f}): load-balancing loss 0.01 on")
            hist.append({"step": step, "t": round(el, 1), "loss": round(li, 4), "lr": lr, "gnorm": round(gn.item(), 3),
                         "load_min": round(lo, 4), "load_max": round(hi, 4)})
            log(f"step {step:5d} loss {li:.4f} lr {lr:.2e} gnorm {gn.item():.2f} P {P} load[min {lo:.3f} max {hi:.3f}]"
                f" {step / max(el, 1e-9):.1f} it/s")
        if step > 0 and step % a.eval_every == 0:
            ho = eval_loss(model, ho_stream, V, C, device)
            log("held-out", {k: round(v, 3) for k, v in ho.items()})
            hist.append({"step": step, "t": round(el, 1), "heldout": ho})
        step += 1
    metrics["train"] = {"steps": step, "seconds": round(time.time() - t_start, 1), "batch": a.batch, "lr": a.lr,
                        "warmup": a.warmup, "wd": a.wd, "aux_loss": aux_on, "history": hist,
                        "tokens_seen_canvas": step * a.batch * C}
    TAP.mode = None
    for h in TAP.handles:
        h.remove()
    TAP = None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    metrics["heldout_loss"] = eval_loss(model, ho_stream, V, C, device)
    metrics["train_window_loss"] = eval_loss(model, tr_stream, V, C, device)
    log("final held-out", metrics["heldout_loss"])
    log("final train-window", metrics["train_window_loss"])
    return model


# ---------------------------------------------------------------- references

def scenario(model, ids, P, C, dtype, ref_sc2=None):
    """hf_fixture.references() on given ids; returns every tensor in `dtype` (floats) / int64. With
    ref_sc2 (the stored float32 sc2_logits) also logits2_refsc: step 2 conditioned on ref_sc2, as
    runtime/testdata/hf_float64.py computes it and the Go parity check runs step 2. Runs on the model's device;
    the results come back on the CPU."""
    cfg = model.config
    dev = next(model.parameters()).device
    ref = dict(ids)
    ids = {k: v.to(dev) for k, v in ids.items()}
    prompt = ids["prompt_ids"][None]
    enc = model.model.encoder
    eo = enc(input_ids=prompt, past_key_values=DynamicCache(config=cfg.text_config), output_hidden_states=True)
    ref["prefill_last_hidden"] = eo.last_hidden_state[0]
    cache = eo.past_key_values
    o1 = model(decoder_input_ids=ids["canvas1_ids"][None], past_key_values=cache, output_hidden_states=True)
    ref["logits1"] = o1.logits[0]
    ref["decoder1_hidden_states"] = torch.stack([h[0] for h in o1.hidden_states])
    t1 = GEN["t_min"] + (GEN["t_max"] - GEN["t_min"]) * (48 / 48)
    sc2 = o1.logits / t1
    ref["sc2_logits"] = sc2[0]
    ref["logits2"] = model(decoder_input_ids=ids["canvas2_ids"][None], past_key_values=cache,
                           self_conditioning_logits=sc2).logits[0]
    if ref_sc2 is not None:
        ref["logits2_refsc"] = model(decoder_input_ids=ids["canvas2_ids"][None], past_key_values=cache,
                                     self_conditioning_logits=ref_sc2[None].to(dev, dtype)).logits[0]
    dist = torch.distributions.Categorical(logits=sc2[0])
    H = dist.entropy()
    sH, idx = torch.sort(H)
    sel = (torch.cumsum(sH, -1) - sH) <= GEN["sampler_config"]["entropy_bound"]
    ref["step1_entropy"] = H
    ref["step1_accept_mask"] = torch.zeros_like(sel).scatter(0, idx, sel).to(torch.int64)
    ref["step1_argmax"] = sc2[0].argmax(-1)
    eo2 = enc(input_ids=ids["block1_ids"][None], past_key_values=cache,
              position_ids=torch.arange(P, P + C, device=dev).unsqueeze(0))
    ref["block1_last_hidden"] = eo2.last_hidden_state[0]
    ref["logits3"] = model(decoder_input_ids=ids["canvas3_ids"][None], past_key_values=eo2.past_key_values,
                           decoder_position_ids=torch.arange(P + C, P + 2 * C, device=dev).unsqueeze(0)).logits[0]
    return {k: t.contiguous().to(dtype).cpu() if t.is_floating_point() else t.contiguous().to(torch.int64).cpu()
            for k, t in ref.items()}


def ref_ids(tok, ho_lines, V, seed):
    P, C = VARIANT["prompt_len"], VARIANT["canvas_length"]
    line = ho_lines[REF_LINE]
    assert len(line) >= P - 1 + 2 * C
    t = torch.tensor(line, dtype=torch.long)
    g = torch.Generator().manual_seed(seed + 1)
    prompt = torch.cat([torch.tensor([2]), t[:P - 1]])
    block1, block2 = t[P - 1:P - 1 + C], t[P - 1 + C:P - 1 + 2 * C]
    ids = {"prompt_ids": prompt, "block1_ids": block1}
    for name, src in (("canvas1_ids", block1), ("canvas2_ids", block1), ("canvas3_ids", block2)):
        ids[name] = corrupt(src[None], NOISE[name], V, g)[0]
    ids = {k: ids[k] for k in ["prompt_ids", "canvas1_ids", "canvas2_ids", "block1_ids", "canvas3_ids"]}
    texts = {"prompt": tok.decode(prompt.tolist(), skip_special_tokens=False),
             "block1": tok.decode(block1.tolist(), skip_special_tokens=False),
             "block2_clean": tok.decode(block2.tolist(), skip_special_tokens=False)}
    return ids, texts


def write_references(a, snap, rev, tok, ho_lines, V, metrics):
    global TAP
    P, C = VARIANT["prompt_len"], VARIANT["canvas_length"]
    ids, texts = ref_ids(tok, ho_lines, V, a.seed)
    m32 = load(snap, torch.float32, "eager", None)
    TAP = RouterTap(m32, VARIANT["top_k_experts"], m32.config.text_config.rms_norm_eps)
    TAP.mode = "eval"
    with torch.no_grad():
        r32 = scenario(m32, ids, P, C, torch.float32)
    rec = TAP.take()
    scen_margins = {short(n): margins(torch.cat(ps), VARIANT["top_k_experts"]).min().item() for n, ps in rec.items()}
    metrics["router_check"] = TAP.checked
    for h in TAP.handles:
        h.remove()
    TAP = None
    log("f32 scenario done; router min margin per layer:", {k: f"{v:.2e}" for k, v in scen_margins.items()})
    m64 = load(snap, torch.float64, "eager", "eager")
    with torch.no_grad():
        r64 = scenario(m64, ids, P, C, torch.float64, ref_sc2=r32["sc2_logits"])
    del m64
    ref = dict(r32)
    for k, t in r64.items():
        if t.is_floating_point():
            ref["f64/" + k] = t
            d = (t - r32[k if k in r32 else "logits2"].double()).abs().max().item()
            log(f"  {k:24s} |f32 - f64| max {d:.3g}")
            metrics.setdefault("f32_vs_f64_maxabs", {})[k] = d
    for k in ["step1_argmax", "step1_accept_mask"]:
        metrics.setdefault("f64_int_check", {})[k] = bool(
            (r64[k] == r32[k]).all()) if k in r64 else None
    out = os.path.join(a.out, "trained")
    save_file(ref, os.path.join(out, "reference.safetensors"))
    notes = {
        **hf.REFERENCE_NOTES,
        "f64/<name>": "the same scenario computed by transformers in float64 (eager attention, eager experts) from the same bf16 weights; f64/sc2_logits = f64/logits1 / t_max and f64/logits2 is conditioned on it",
        "f64/logits2_refsc": "float64 step 2 conditioned on the stored float32 sc2_logits (as runtime/testdata/hf_float64.py computes it); the float64 anchor of logits2 for a check that conditions step 2 on the stored sc2_logits",
        "ids": "prompt_ids = <bos> + the first P-1 tokens of heldout.txt line %d (1-based); block1_ids = the next C tokens (clean); canvas1_ids / canvas2_ids = block1_ids with each position replaced by a uniform id in [0, V) with probability 0.3 / 0.6; canvas3_ids = the following C tokens with probability 1.0 (all uniform)" % (REF_LINE + 1),
    }
    meta = {"repo": a.repo, "revision": rev, "variant": "trained", "seed": a.seed,
            "transformers": __import__("transformers").__version__, "torch": torch.__version__,
            "prompt_len": P, "canvas_length": C, "temperature_step1": GEN["t_max"],
            "tensors": {k: {"shape": list(t.shape), "dtype": str(t.dtype)} for k, t in ref.items()},
            "notes": notes, "noise_rates": NOISE, "heldout_line": REF_LINE + 1, "texts": texts,
            "router_min_margin_f32": scen_margins}
    with open(os.path.join(out, "reference.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
    log("wrote references", sorted(ref))
    return m32


@torch.no_grad()
def router_margins(model, ho_stream, V, C, metrics, device="cpu"):
    global TAP
    K = VARIANT["top_k_experts"]
    TAP = RouterTap(model, K, model.config.text_config.rms_norm_eps)
    g = torch.Generator().manual_seed(11)
    prefix, clean = windows(ho_stream, 64, 48, C, g, device)
    TAP.mode = "eval"
    eo = model.model.encoder(input_ids=prefix, past_key_values=DynamicCache(config=model.config.text_config))
    noisy = corrupt(clean, torch.rand(64, generator=g), V, g)
    z = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values).logits
    model(decoder_input_ids=noisy, past_key_values=eo.past_key_values, self_conditioning_logits=z / 0.6)
    rec = TAP.take()
    for h in TAP.handles:
        h.remove()
    TAP = None
    res, loads = {}, {}
    for name, ps in rec.items():
        pr = torch.cat(ps)
        res[short(name)] = qstats(margins(pr, K))
        loads[short(name)] = [round(x, 4) for x in
                              (F.one_hot(pr.topk(K, -1).indices, VARIANT["num_experts"]).sum(1).float().mean(0) / K).tolist()]
    metrics["router_margins_heldout"] = res
    metrics["expert_load_heldout"] = loads
    log("router margins on held-out windows (gap between k-th and (k+1)-th router probability):")
    for n, s in res.items():
        log(f"  {n:7s} n={s['n']:6d} min {s['min']:.2e} p1 {s['p1']:.2e} p10 {s['p10']:.2e} median {s['median']:.3f}"
            f"  <1e-3: {s['below_1e-3']}  load {loads[n]}")


@torch.no_grad()
def own_generate(model, prompt, V, C, seed):
    """docs/model-spec.md section 4, batch 1 (used only if transformers' generate fails)."""
    torch.manual_seed(seed)
    enc = model.model.encoder
    cache = enc(input_ids=prompt, past_key_values=DynamicCache(config=model.config.text_config)).past_key_values
    seq, cur_len, N = prompt, prompt.shape[1], GEN["max_denoising_steps"]
    for b in range(math.ceil(GEN["max_new_tokens"] / C)):
        if b > 0:
            cache = enc(input_ids=seq[:, -C:], past_key_values=cache,
                        position_ids=torch.arange(cur_len - C, cur_len)[None]).past_key_values
        canvas, sc, prev = torch.randint(0, V, (1, C)), None, None
        for cur in range(N, 0, -1):
            z = model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=sc,
                      decoder_position_ids=torch.arange(cur_len, cur_len + C)[None]).logits
            T = GEN["t_min"] + (GEN["t_max"] - GEN["t_min"]) * (cur / N)
            Z = z / T
            d = torch.multinomial(Z[0].softmax(-1), 1)[:, 0]
            am = Z[0].argmax(-1)
            H = torch.distributions.Categorical(logits=Z[0]).entropy()
            sH, idx = torch.sort(H)
            sel = (torch.cumsum(sH, -1) - sH) <= GEN["sampler_config"]["entropy_bound"]
            acc = torch.zeros_like(sel).scatter(0, idx, sel)
            canvas = torch.where(acc, d, torch.randint(0, V, (C,)))[None]
            stable = prev is not None and bool((am == prev).all())
            prev, sc = am, Z
            if stable and H.mean().item() < GEN["confidence_threshold"]:
                break
        seq = torch.cat([seq, prev[None]], 1)
        cur_len += C
        if any(int(t) in GEN["eos_token_id"] for t in prev):
            break
    return seq


@torch.no_grad()
def generations(model, tok, ho_lines, V, C, metrics):
    samples = []
    for j, li in enumerate(GEN_LINES):
        line = ho_lines[li]
        prompt = torch.tensor([[2] + line[:24]])
        truth = tok.decode(line[24:24 + GEN["max_new_tokens"]], skip_special_tokens=False)
        entry = {"heldout_line": li + 1, "prompt": tok.decode(line[:24], skip_special_tokens=False),
                 "reference_continuation": truth}
        for how in ("transformers.generate", "own sampler"):
            try:
                torch.manual_seed(1000 + j)
                if how == "transformers.generate":
                    out = model.generate(input_ids=prompt)
                    seq = out.sequences if hasattr(out, "sequences") else out
                else:
                    seq = own_generate(model, prompt, V, C, 1000 + j)
                new = seq[0, prompt.shape[1]:].tolist()
                entry[how] = tok.decode(new, skip_special_tokens=False)
                entry[how + " ids"] = len(new)
                if how == "transformers.generate":
                    break
            except Exception:
                log(f"generation with {how} failed")
                traceback.print_exc()
        samples.append(entry)
        log(f"--- held-out line {li + 1}\n  PROMPT: {entry['prompt']}\n  GEN   : "
            f"{entry.get('transformers.generate', entry.get('own sampler'))}\n  TRUE  : {truth}")
    metrics["generation_method"] = "transformers.generate" if all("transformers.generate" in s for s in samples) else "mixed/own"
    json.dump(samples, open(os.path.join(os.path.dirname(metrics["_out"]), "samples.json"), "w"), indent=2)


@torch.no_grad()
def convergence(model, ho_lines, n, metrics, prompt_tokens=40):
    """transformers' own generate (the checkpoint's generation_config: blocks of C, 48 steps, the
    StableAndConfident stop) on n held-out prompts (<bos> + the first prompt_tokens tokens of held-out line
    i, torch.manual_seed(2000 + i)); the denoising steps of every block are counted with forward hooks: the
    decoder passes between two encoder passes."""
    events = []
    enc = model.model.encoder
    dec = getattr(model.model, "decoder", None)
    hooks = [enc.register_forward_hook(lambda *_: events.append("E"))]
    if dec is not None:
        hooks.append(dec.register_forward_hook(lambda *_: events.append("D")))
    else:
        hooks.append(model.register_forward_hook(lambda *_: events.append("D")))
    steps = []
    try:
        for i in range(min(n, len(ho_lines))):
            events.clear()
            torch.manual_seed(2000 + i)
            model.generate(input_ids=torch.tensor([[2] + ho_lines[i][:prompt_tokens]]))
            run = None
            for e in events:
                if e == "E":
                    if run:
                        steps.append(run)
                    run = 0
                elif run is not None:
                    run += 1
            if run:
                steps.append(run)
    finally:
        for h in hooks:
            h.remove()
    N = GEN["max_denoising_steps"]
    s = sorted(steps)
    res = {"prompts": n, "prompt_tokens": prompt_tokens, "blocks": len(s), "steps": steps,
           "median": s[len(s) // 2] if s else None, "mean": sum(s) / len(s) if s else None,
           "at_limit": sum(1 for v in s if v >= N), "limit": N}
    metrics["convergence"] = res
    log("convergence", {k: v for k, v in res.items() if k != "steps"})


# ---------------------------------------------------------------- fixtures

def fixtures_post(proc, a):
    proc.wait()
    log("hf_float64.py exit", proc.returncode)
    os.makedirs(os.path.join(a.out, "fixtures"), exist_ok=True)
    names = ["prefill_last_hidden", "logits1", "decoder1_hidden_states", "sc2_logits", "logits2",
             "logits2_refsc", "block1_last_hidden", "logits3"]
    for fx in ["tiny", "wide", "tiny-distinct"]:
        r = load_file(os.path.join(a.out, "f64raw", f"ref64_{fx}.safetensors"))
        add = {f"f64/{n}": r[f"f64/{n}"].to(torch.float64).contiguous() for n in names}
        add["f64/step1_entropy"] = torch.distributions.Categorical(logits=add["f64/sc2_logits"]).entropy().contiguous()
        save_file(add, os.path.join(a.out, "fixtures", f"f64add_{fx}.safetensors"))
        log(fx, {k: tuple(v.shape) for k, v in add.items()})


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=420, help="seconds of training")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--impl", default="auto", help='"auto" (probe and pick the fastest) or ATTN/EXPERTS, e.g. sdpa/eager')
    ap.add_argument("--fixtures", action="store_true", help="also run runtime/testdata/hf_float64.py")
    ap.add_argument("--ship", default=None, help="pack the outputs into this folder at the end")
    ap.add_argument("--repo", default=REPO, help="hub repository name of the checkpoint")
    ap.add_argument("--tokenizer-words", action="store_true",
                    help="train the tokenizer on single words (no token spans a space): for facts_corpus.py")
    ap.add_argument("--convergence", type=int, default=0,
                    help="also measure transformers' steps per block on this many held-out prompts")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(os.path.join(a.out, "trained"), exist_ok=True)
    metrics = {"_out": os.path.join(a.out, "metrics.json"), "variant": VARIANT, "generation_config": GEN,
               "argv": sys.argv, "torch": torch.__version__,
               "transformers": __import__("transformers").__version__}
    proc = None
    if a.fixtures:
        os.makedirs(os.path.join(a.out, "f64raw"), exist_ok=True)
        env = dict(os.environ, OUT=os.path.join(a.out, "f64raw"), OMP_NUM_THREADS="4")
        proc = subprocess.Popen([sys.executable, "runtime/testdata/hf_float64.py"], env=env,
                                stdout=open(os.path.join(a.out, "hf_float64.log"), "w"), stderr=subprocess.STDOUT)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    V, C = VARIANT["vocab_size"], VARIANT["canvas_length"]
    try:
        tokdir = tempfile.mkdtemp()
        log("== tokenizer")
        # The tokenizer does not split at spaces (its normalizer turns them into U+2581 first), so each
        # line is one "word" to the BPE trainer: feed it sentence-sized lines rather than whole chapters.
        tok_txt = os.path.join(tokdir, "tokenizer_train.txt")
        with open(tok_txt, "w", encoding="utf-8") as fh:
            for l in open(a.corpus, encoding="utf-8"):
                if not l.strip():
                    continue
                if a.tokenizer_words:  # one space-led word per line: merges never cross a word boundary
                    fh.write("".join(" " + w + "\n" for w in l.split()))
                else:
                    fh.write("\n".join(re.split(r"(?<=[.;:?!]) ", l.strip())) + "\n")
        hf.write_tiny_tokenizer(tokdir, V, tok_txt)
        tok, tr_lines, tr_stream = tokenize(os.path.join(tokdir, "tokenizer.json"), a.corpus)
        _, ho_lines, ho_stream = tokenize(os.path.join(tokdir, "tokenizer.json"), a.heldout)
        assert tok.token_to_id("<bos>") == 2 and tok.get_vocab_size() <= V
        metrics["tokens"] = {"train": tr_stream.numel(), "heldout": ho_stream.numel(), "vocab": tok.get_vocab_size(),
                             "train_chars": os.path.getsize(a.corpus)}
        log("tokens", metrics["tokens"])
        cfg = hf.build_config(VARIANT)
        init = DiffusionGemmaForBlockDiffusion(cfg).eval()
        n_params = sum(p.numel() for p in init.parameters())
        metrics["params"] = n_params
        log(f"params {n_params} -> bf16 {2 * n_params / 1e6:.2f} MB")
        assert 2 * n_params <= 16e6
        init_dir = tempfile.mkdtemp()
        init.save_pretrained(init_dir, safe_serialization=True)
        model = stage("train", train, a, init_dir, tr_stream, ho_stream, V, C, device, metrics)
        assert model is not None, "training failed"

        def save():
            fresh = DiffusionGemmaForBlockDiffusion(hf.build_config(VARIANT)).eval()
            sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
            missing, unexpected = fresh.load_state_dict(sd, strict=False)
            log("load_state_dict missing", missing, "unexpected", unexpected)
            fresh = fresh.to(torch.bfloat16)
            tmp = hf.save_snapshot_files(fresh, GEN, "2MB")
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(tokdir, f), os.path.join(tmp, f))
            log("snapshot files", {f: os.path.getsize(os.path.join(tmp, f)) for f in sorted(os.listdir(tmp))})
            rev, snap = hf.write_hub_layout(tmp, os.path.join(a.out, "trained"), a.repo)
            metrics["revision"] = rev
            return rev, snap
        rev, snap = stage("save", save)
        m32 = stage("references", write_references, a, snap, rev, tok, ho_lines, V, metrics)
        if m32 is None:
            m32 = load(snap, torch.float32, "eager", None)
        stage("router margins", router_margins, m32, ho_stream, V, C, metrics)
        stage("generations", generations, m32, tok, ho_lines, V, C, metrics)
        if a.convergence:
            stage("convergence", convergence, m32, ho_lines, a.convergence, metrics)
    except Exception:
        log("!! FAILED")
        traceback.print_exc()
    finally:
        if proc is not None:
            stage("fixtures", fixtures_post, proc, a)
        json.dump(metrics, open(metrics["_out"], "w"), indent=2, default=str)
        if a.ship:
            with tarfile.open(os.path.join(a.ship, "trained.tgz"), "w:gz") as t:
                for f in ("trained", "metrics.json", "samples.json", "hf_float64.log"):
                    if os.path.exists(os.path.join(a.out, f)):
                        t.add(os.path.join(a.out, f), arcname=f)
            if os.path.isdir(os.path.join(a.out, "fixtures")):
                with tarfile.open(os.path.join(a.ship, "fixtures.tgz"), "w:gz") as t:
                    t.add(os.path.join(a.out, "fixtures"), arcname="fixtures")
        log("done")


if __name__ == "__main__":
    main()
