#!/usr/bin/env python3
"""Make transformers references for dequantized packs (docs/runtime.md).

For each directory DIR given (written by `DGQ_DEQUANT_OUT=... go test ./runtime
-run TestWriteDequantized`: a snapshot whose weights are a quantized pack's
decoded weights, plus the fixture's reference as fixture_reference.*), load it
with transformers 5.17 in float32 with eager attention and the default experts
path (as testdata/tools/hf_fixture.py does), replay the fixture scenarios on the
fixture's ids, and write $OUT/<basename DIR>/reference.safetensors and
reference.json in the fixture reference format, so runtime.Parity can compare
the runtime on the quantized pack with transformers on the same weights.

    OUT=/tmp/out python3 runtime/testdata/hf_dequant.py DIR...
"""
import json, os, sys

import torch
from safetensors.torch import load_file, save_file
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

OUT = os.environ.get("OUT", ".")
ENTROPY_BOUND = 0.1


@torch.no_grad()
def references(model, ids, temperature):
    P, C = ids["prompt_ids"].numel(), ids["canvas1_ids"].numel()
    get = lambda name: ids[name].unsqueeze(0)
    ref = {name: ids[name] for name in ["prompt_ids", "canvas1_ids", "canvas2_ids", "block1_ids", "canvas3_ids"]}
    encoder = model.model.encoder
    enc = encoder(input_ids=get("prompt_ids"), past_key_values=DynamicCache(config=model.config.text_config))
    ref["prefill_last_hidden"] = enc.last_hidden_state[0]
    cache = enc.past_key_values
    o1 = model(decoder_input_ids=get("canvas1_ids"), past_key_values=cache, output_hidden_states=True)
    ref["logits1"] = o1.logits[0]
    ref["decoder1_hidden_states"] = torch.stack([h[0] for h in o1.hidden_states])
    sc2 = o1.logits / temperature
    ref["sc2_logits"] = sc2[0]
    ref["logits2"] = model(decoder_input_ids=get("canvas2_ids"), past_key_values=cache,
                           self_conditioning_logits=sc2).logits[0]
    H = torch.distributions.Categorical(logits=sc2[0]).entropy()
    sH, idx = torch.sort(H)
    sel = (torch.cumsum(sH, -1) - sH) <= ENTROPY_BOUND
    ref["step1_entropy"] = H
    ref["step1_accept_mask"] = torch.zeros_like(sel).scatter(0, idx, sel).to(torch.int64)
    ref["step1_argmax"] = sc2[0].argmax(-1)
    enc2 = encoder(input_ids=get("block1_ids"), past_key_values=cache,
                   position_ids=torch.arange(P, P + C).unsqueeze(0))
    ref["block1_last_hidden"] = enc2.last_hidden_state[0]
    ref["logits3"] = model(decoder_input_ids=get("canvas3_ids"), past_key_values=enc2.past_key_values,
                           decoder_position_ids=torch.arange(P + C, P + 2 * C).unsqueeze(0)).logits[0]
    return {k: t.contiguous().float() if t.is_floating_point() else t.contiguous().to(torch.int64)
            for k, t in ref.items()}


for d in sys.argv[1:]:
    name = os.path.basename(os.path.normpath(d))
    ids = load_file(os.path.join(d, "fixture_reference.safetensors"))
    meta = json.load(open(os.path.join(d, "fixture_reference.json")))
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    ref = references(model, ids, meta["temperature_step1"])
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    save_file(ref, os.path.join(OUT, name, "reference.safetensors"))
    meta["tensors"] = {k: {"shape": list(t.shape), "dtype": str(t.dtype)} for k, t in ref.items()}
    meta["dequantized_from"] = name
    meta["transformers"] = __import__("transformers").__version__
    meta["torch"] = torch.__version__
    json.dump(meta, open(os.path.join(OUT, name, "reference.json"), "w"), indent=2)
    print(name, "logits1 vs fixture reference:",
          (ref["logits1"] - ids["logits1"]).abs().max().item())
