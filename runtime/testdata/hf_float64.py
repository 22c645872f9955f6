#!/usr/bin/env python3
"""Measure the float32 rounding noise of the parity references (docs/runtime.md).

Replays the scenarios of testdata/tools/hf_fixture.py's references() with
transformers 5.17 twice per fixture: in float64 (eager attention, eager
experts) and in float32 (eager attention, the default experts path, exactly
as the stored references were made), and prints how far each is from the
stored float32 reference. The float64 run is the closest thing to the exact
result; its distance to the stored reference is the noise any float32
implementation has to live with. Also saves the float64 outputs as
$OUT/ref64_<fixture>.safetensors (keys f64/<name>, f32/<name>, plus
logits2_refsc: step 2 conditioned on the stored sc2_logits).

Run from the repository root where torch and transformers are installed (the
GPU device machine has both; everything runs on its CPU):

    OUT=/tmp/out python3 runtime/testdata/hf_float64.py
"""
import glob, json, os

import torch
from safetensors.torch import load_file, save_file
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

OUT = os.environ.get("OUT", ".")
NAMES = ["prefill_last_hidden", "logits1", "decoder1_hidden_states", "sc2_logits", "logits2",
         "block1_last_hidden", "logits3"]


def locate(fixture):
    if fixture == "tiny":
        return "dgq/testmodel/tiny/snapshot", "dgq/testmodel/tiny/reference"
    repo = glob.glob(f"testdata/{fixture}/hub/models--*")[0]
    rev = open(os.path.join(repo, "refs", "main")).read().strip()
    return os.path.join(repo, "snapshots", rev), f"testdata/{fixture}"


@torch.no_grad()
def scenarios(model, ref, temperature, dtype):
    P, C = ref["prompt_ids"].numel(), ref["canvas1_ids"].numel()
    ids = lambda name: ref[name].unsqueeze(0)
    out = {}
    encoder = model.model.encoder
    enc = encoder(input_ids=ids("prompt_ids"), past_key_values=DynamicCache(config=model.config.text_config))
    out["prefill_last_hidden"] = enc.last_hidden_state[0]
    cache = enc.past_key_values
    o1 = model(decoder_input_ids=ids("canvas1_ids"), past_key_values=cache, output_hidden_states=True)
    out["logits1"] = o1.logits[0]
    out["decoder1_hidden_states"] = torch.stack([h[0] for h in o1.hidden_states])
    sc2 = o1.logits / temperature
    out["sc2_logits"] = sc2[0]
    out["logits2"] = model(decoder_input_ids=ids("canvas2_ids"), past_key_values=cache,
                           self_conditioning_logits=sc2).logits[0]
    out["logits2_refsc"] = model(decoder_input_ids=ids("canvas2_ids"), past_key_values=cache,
                                 self_conditioning_logits=ref["sc2_logits"].unsqueeze(0).to(dtype)).logits[0]
    enc2 = encoder(input_ids=ids("block1_ids"), past_key_values=cache,
                   position_ids=torch.arange(P, P + C).unsqueeze(0))
    out["block1_last_hidden"] = enc2.last_hidden_state[0]
    out["logits3"] = model(decoder_input_ids=ids("canvas3_ids"), past_key_values=enc2.past_key_values,
                           decoder_position_ids=torch.arange(P + C, P + 2 * C).unsqueeze(0)).logits[0]
    return out


for fixture in ["tiny", "wide", "tiny-distinct"]:
    snapshot, refdir = locate(fixture)
    ref = load_file(os.path.join(refdir, "reference.safetensors"))
    temperature = json.load(open(os.path.join(refdir, "reference.json")))["temperature_step1"]
    saved = {}
    for tag, dtype in [("f64", torch.float64), ("f32", torch.float32)]:
        extra = {"experts_implementation": "eager"} if dtype == torch.float64 else {}  # grouped_mm has no float64
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(snapshot, dtype=dtype, attn_implementation="eager",
                                                                **extra).eval()
        for name, t in scenarios(model, ref, temperature, dtype).items():
            saved[f"{tag}/{name}"] = t.contiguous().to(torch.float64)
    for name in NAMES:
        stored = ref[name].double()
        print(f"{fixture:14s} {name:24s} f32-rerun {(saved['f32/' + name] - stored).abs().max().item():.3g}"
              f"  f64 {(saved['f64/' + name] - stored).abs().max().item():.3g}")
    print(f"{fixture:14s} logits2 conditioned on the stored sc2_logits: f64 "
          f"{(saved['f64/logits2_refsc'] - ref['logits2'].double()).abs().max().item():.3g}")
    save_file(saved, os.path.join(OUT, f"ref64_{fixture}.safetensors"))
