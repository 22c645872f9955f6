#!/usr/bin/env python3
"""The chat reference: transformers' apply_chat_template for one user message with
add_generation_prompt=True, tokenized, for each tokenizer directory given.

    python3 chat_reference.py OUT_JSON NAME=DIR...
"""
import json, sys
import transformers
from transformers import AutoTokenizer

messages = ["Hello world", "  What is the meaning of 67?\n\t", "\n\nline one\nline two\n\n", "日本語 🤖 café",
            "tabs\tinside\t", "\u3000 ideographic spaces \u00a0", "a <start_of_turn>b<end_of_turn> c", "", "   ",
            "<bos>x", "ends with newline\n", "\x1cseparators\x1f"]
out = {"transformers_version": transformers.__version__, "tokenizers_version": __import__("tokenizers").__version__,
       "cases": []}
for arg in sys.argv[2:]:
    name, d = arg.split("=", 1)
    tok = AutoTokenizer.from_pretrained(d)
    for m in messages:
        conv = [{"role": "user", "content": m}]
        text = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        ids = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=True)
        if not isinstance(ids, list):
            ids = ids["input_ids"]
        out["cases"].append({"tokenizer": name, "message": m, "text": text, "ids": list(ids)})
json.dump(out, open(sys.argv[1], "w"), ensure_ascii=False, indent=1)
print("wrote", len(out["cases"]), "cases")
