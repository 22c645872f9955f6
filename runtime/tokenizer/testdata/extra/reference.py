#!/usr/bin/env python3
"""The extra reference: like testdata/tools/tokenizer_reference.py (same fields, same meaning), plus
   decoded_skip: decode(ids_with_special, skip_special_tokens=True) per case, and
   id_cases: decode(ids, skip_special_tokens=False/True) of seeded random id sequences (byte tokens,
   special tokens, ids out of range), to pin down the decoder on sequences no encoding produces.

    python3 reference.py TOKENIZER_JSON STRINGS_JSON OUT_JSON
"""
import json, random, sys
from tokenizers import Tokenizer

tok = Tokenizer.from_file(sys.argv[1])
strings = json.load(open(sys.argv[2]))
out = {"tokenizers_version": __import__("tokenizers").__version__, "cases": [], "id_cases": []}
for s in strings:
    plain = tok.encode(s, add_special_tokens=False)
    special = tok.encode(s, add_special_tokens=True)
    out["cases"].append({
        "text": s,
        "ids": plain.ids,
        "tokens": plain.tokens,
        "ids_with_special": special.ids,
        "decoded": tok.decode(plain.ids, skip_special_tokens=False),
        "decoded_skip": tok.decode(special.ids, skip_special_tokens=True),
    })
rng = random.Random(7)
size = tok.get_vocab_size(with_added_tokens=True)
vocab = tok.get_vocab(with_added_tokens=True)
byte_ids = [vocab["<0x%02X>" % b] for b in range(256) if "<0x%02X>" % b in vocab]
special_ids = [i for t, i in vocab.items() if t.startswith("<") and t.endswith(">")][:64]
hi = max(vocab.values())
for n in range(200):
    ids = []
    for _ in range(rng.choice([1, 2, 3, 4, 6, 9])):
        k = rng.random()
        if k < 0.45:
            ids.append(rng.choice(byte_ids))
        elif k < 0.6:
            ids.append(rng.choice(special_ids))
        elif k < 0.95:
            ids.append(rng.randrange(0, hi + 1))
        else:
            ids.append(hi + 1 + rng.randrange(0, 5))
    out["id_cases"].append({
        "ids": ids,
        "decoded": tok.decode(ids, skip_special_tokens=False),
        "decoded_skip": tok.decode(ids, skip_special_tokens=True),
    })
json.dump(out, open(sys.argv[3], "w"), ensure_ascii=False, indent=1)
print("wrote", len(out["cases"]), "cases and", len(out["id_cases"]), "id cases")
