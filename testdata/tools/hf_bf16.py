#!/usr/bin/env python3
"""transformers in bfloat16 on a checkpoint: the yardstick of a GPU backend's bf16 precision.

Provenance: written for issue 13 ("the bf16 precision of a GPU backend is judged the same way against
transformers bf16 on the trained checkpoint"); issue 19 added the embedded tiny checkpoint (dgq selftest
--precision bf16 judges against it). Runs where torch + transformers 5.17 are installed and a CUDA GPU is
present (the project's GPU machine), from the repository root:

    python3 testdata/tools/hf_bf16.py testdata/trained [--windows 64]
    python3 testdata/tools/hf_bf16.py dgq/testmodel/tiny [--windows 64]

A directory with hub/ is laid out as testdata/trained (the snapshot in the hub cache, reference.* and
heldout.txt beside it); otherwise as dgq/testmodel/tiny (snapshot/ and reference/), whose random weights read
no text: its routing windows are random token ids (seed 11).

What it does, on testdata/trained (the snapshot under hub/, the ids of reference.safetensors):
  1. loads the checkpoint in bfloat16 on the GPU (eager attention, transformers' default experts path: what a
     user running the model in bf16 gets) and replays the reference scenario of train_tiny.scenario() on the
     stored ids; every float result is added to reference.safetensors as bf16/<name> (stored as float32, the
     bf16 values exactly), bf16/logits2_refsc being step 2 conditioned on the stored float32 sc2_logits. The
     tensors already in the file are written back with the same values.
  2. measures how transformers' bf16 routes tokens against its own float64 (eager attention and experts, on
     the CPU) on --windows held-out windows (a prefix of 48 through the encoder, then a canvas of 32 at noise
     r ~ U(0, 1), without and with self-conditioning; the same windows as train_tiny.router_margins): every
     router call's top-k expert set of every token, compared. Within one forward a flip changes that token's
     output, and attention carries it to later layers, so only the first layer with a flip in each forward
     holds flips of bf16 rounding alone ("cause" flips); the largest float64 selection margin among them
     (k-th minus (k+1)-th router probability, float64) is recorded in reference.json under "bf16", with the
     counts. Go's lockstep (runtime/check.GenerateLockstep) explains a bf16 GPU's routing flips by twice it.
"""
import argparse, glob, json, os, sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny as tt  # noqa: E402
from transformers import DynamicCache  # noqa: E402


class Routes:
    """Records every router call's top-k expert sets (from the module's integer output) and, with margins,
    the float64 selection margin of each token (recomputed from the router's input as docs/model-spec.md
    3.4 gives it, in float64)."""

    def __init__(self, model, k, eps, margins):
        self.k, self.eps, self.margins, self.calls, self.handles = k, eps, margins, [], []
        for name, m in model.named_modules():
            if name.split(".")[-1] == "router" and hasattr(m, "proj") and hasattr(m, "scale"):
                self.handles.append(m.register_forward_hook(self.hook, with_kwargs=True))
        assert self.handles, "no router modules found"

    def hook(self, mod, args, kwargs, out):
        outs = out if isinstance(out, (tuple, list)) else [out]
        idx = [o for o in outs if torch.is_tensor(o) and not o.is_floating_point()]
        assert idx, "router output has no integer tensor"
        sets = idx[0].reshape(-1, self.k).sort(-1).values.cpu()
        m = None
        if self.margins:
            x = args[0] if args else next(v for v in kwargs.values() if torch.is_tensor(v))
            x = x.reshape(-1, x.shape[-1]).double()
            xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            p = ((xn * mod.scale.double() * (x.shape[-1] ** -0.5)) @ mod.proj.weight.double().t()).softmax(-1)
            top = p.topk(self.k + 1, -1)
            m = (top.values[:, self.k - 1] - top.values[:, self.k]).cpu()
            agree = (top.indices[:, :self.k].sort(-1).values.cpu() == sets).all(-1).float().mean().item()
            if agree < 0.99:
                print(f"warning: float64 recomputation agrees with the router on {agree:.3f} of tokens")
        self.calls.append((sets, m))

    def take(self):
        c, self.calls = self.calls, []
        return c


@torch.no_grad()
def forwards(model, prefix, noisy):
    """The three forwards of one batch of windows: encoder, canvas, canvas with self-conditioning."""
    cfg = model.config
    eo = model.model.encoder(input_ids=prefix, past_key_values=DynamicCache(config=cfg.text_config))
    z = model(decoder_input_ids=noisy, past_key_values=eo.past_key_values).logits
    model(decoder_input_ids=noisy, past_key_values=eo.past_key_values, self_conditioning_logits=z / 0.6)


def routing(m16, m64, stream, V, C, windows, layers, K):
    g = torch.Generator().manual_seed(11)
    prefix, clean = tt.windows(stream, windows, 48, C, g, "cpu")
    noisy = tt.corrupt(clean, torch.rand(windows, generator=g), V, g)
    eps = m64.config.text_config.rms_norm_eps
    r16, r64 = Routes(m16, K, eps, False), Routes(m64, K, eps, True)
    res = {"windows": windows, "decisions": 0, "flips": 0, "cause_flips": 0, "max_cause_margin": 0.0,
           "max_flip_margin": 0.0, "cause_margins": []}
    for w in range(windows):  # one window a forward, so that "first layer with a flip" is per sequence
        forwards(m16, prefix[w:w + 1].cuda(), noisy[w:w + 1].cuda())
        forwards(m64, prefix[w:w + 1], noisy[w:w + 1])
        c16, c64 = r16.take(), r64.take()
        assert len(c16) == len(c64) == 3 * layers, (len(c16), len(c64))
        for f in range(3):  # each forward: its layers' calls in order
            cause = True
            for (s16, _), (s64, m) in zip(c16[f * layers:(f + 1) * layers], c64[f * layers:(f + 1) * layers]):
                flip = (s16 != s64).any(-1)
                res["decisions"] += flip.numel()
                res["flips"] += int(flip.sum())
                if flip.any():
                    res["max_flip_margin"] = max(res["max_flip_margin"], m[flip].max().item())
                    if cause:
                        res["cause_flips"] += int(flip.sum())
                        res["cause_margins"] += m[flip].tolist()
                        res["max_cause_margin"] = max(res["max_cause_margin"], m[flip].max().item())
                    cause = False
    res["cause_margins"] = sorted(res["cause_margins"])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", help="testdata/trained or dgq/testmodel/tiny")
    ap.add_argument("--windows", type=int, default=64)
    a = ap.parse_args()
    trained = os.path.isdir(os.path.join(a.dir, "hub"))
    if trained:
        snap, refdir = glob.glob(os.path.join(a.dir, "hub", "models--*", "snapshots", "*"))[0], a.dir
    else:
        snap, refdir = os.path.join(a.dir, "snapshot"), os.path.join(a.dir, "reference")
    ref_path, meta_path = os.path.join(refdir, "reference.safetensors"), os.path.join(refdir, "reference.json")
    ref = load_file(ref_path)
    meta = json.load(open(meta_path))
    P, C = meta["prompt_len"], meta["canvas_length"]
    ids = {k: ref[k] for k in ["prompt_ids", "canvas1_ids", "canvas2_ids", "block1_ids", "canvas3_ids"]}

    m16 = tt.load(snap, torch.bfloat16, "eager", None, device="cuda")
    r16 = tt.scenario(m16, ids, P, C, torch.bfloat16, ref_sc2=ref["sc2_logits"])
    added = {}
    for k, t in r16.items():
        if t.is_floating_point():
            added["bf16/" + k] = t.float()
            base = ref["f64/" + k] if "f64/" + k in ref else None
            if base is not None:
                print(f"  bf16/{k:22s} |bf16 - f64| max {(t.double() - base).abs().max().item():.3g}"
                      f"   |f32 - f64| max {(ref[k if k in ref else 'logits2'].double() - base).abs().max().item():.3g}")
    out = dict(ref)
    out.update(added)
    save_file(out, ref_path)

    m64 = tt.load(snap, torch.float64, "eager", "eager")
    tc = m64.config.text_config
    if trained:
        _, _, stream = tt.tokenize(os.path.join(snap, "tokenizer.json"), os.path.join(a.dir, "heldout.txt"))
    else:
        stream = torch.randint(3, tc.vocab_size, (1 << 16,), generator=torch.Generator().manual_seed(11))
    rt = routing(m16, m64, stream, tc.vocab_size, C, a.windows, tc.num_hidden_layers, tc.top_k_experts)
    print("bf16 vs float64 routing:", {k: v for k, v in rt.items() if k != "cause_margins"})
    meta["tensors"].update({k: {"shape": list(t.shape), "dtype": str(t.dtype)} for k, t in added.items()})
    meta.setdefault("notes", {})["bf16/<name>"] = (
        "the same scenario computed by transformers in bfloat16 on the GPU (eager attention, default experts "
        "path) from the same weights, stored as float32; bf16/logits2_refsc is step 2 conditioned on the stored "
        "float32 sc2_logits (as the Go parity check runs it) and anchors logits2 (testdata/tools/hf_bf16.py)")
    meta["bf16"] = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "routing_vs_f64": {k: v for k, v in rt.items() if k != "cause_margins"},
        "cause_margins_largest": rt["cause_margins"][-8:],
        "notes": "routing_vs_f64: transformers bfloat16 (GPU) against transformers float64 (CPU) on held-out "
                 "windows, one window a forward (encoder, canvas, canvas with self-conditioning); decisions = "
                 "tokens x router calls; flips = different top-k expert sets; cause_flips = flips of the first "
                 "layer with a flip in each forward; margins are float64 selection margins (k-th minus "
                 "(k+1)-th router probability)"}
    with open(meta_path, "w") as fh:
        json.dump(meta, fh, indent=2)
    print("wrote", ref_path, "and", meta_path)


if __name__ == "__main__":
    main()
