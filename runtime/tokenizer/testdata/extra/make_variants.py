#!/usr/bin/env python3
"""Writes variants of the tiny tokenizer.json that exercise the settings the real files leave unused
(added-token flags, Prepend, other Split behaviours, Strip, legacy merges, no components), and
variant-strings.json, the texts to encode with them.

    python3 make_variants.py TINY_TOKENIZER_JSON OUT_DIR
"""
import copy, json, sys

base = json.load(open(sys.argv[1]))
out = sys.argv[2]


def added(content, id_, special=False, single_word=False, lstrip=False, rstrip=False, normalized=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def split(behavior, invert=False, pattern="\u2581"):
    return {"type": "Split", "pattern": {"String": pattern}, "behavior": behavior, "invert": invert}


variants = {}

v = copy.deepcopy(base)
v["added_tokens"] += [
    added("<mask>", 512, lstrip=True, rstrip=True),
    added("ony", 513, single_word=True),
    added("my name", 514, normalized=True),
    added("<a>", 515, rstrip=True),
    added(" <b>", 516),
    added("<sw>", 517, single_word=True, lstrip=True, special=True),
    added("\u00e9", 518, normalized=True, special=True),
    added("ab", 519, normalized=True),
    added("abc", 520),
]
variants["flags"] = v

v = copy.deepcopy(base)
v["normalizer"] = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split("MergedWithNext")]}
v["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
variants["prepend"] = v

for name, behavior, invert in [("removed", "Removed", False), ("isolated", "Isolated", False),
                               ("contiguous", "Contiguous", False), ("previous-invert", "MergedWithPrevious", True),
                               ("next-invert", "MergedWithNext", True), ("contiguous-invert", "Contiguous", True)]:
    v = copy.deepcopy(base)
    v["pre_tokenizer"] = split(behavior, invert)
    v["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": "e", "start": 2, "stop": 0}]}
    variants["split-" + name] = v

v = copy.deepcopy(base)
m = v["model"]
m["merges"] = [a + " " + b for a, b in m["merges"]]
m["ignore_merges"] = True
m["fuse_unk"] = False
m["byte_fallback"] = False
variants["legacy"] = v

v = copy.deepcopy(base)
v["normalizer"] = None
v["pre_tokenizer"] = None
v["decoder"] = None
v["post_processor"] = None
variants["bare"] = v

for name, v in variants.items():
    json.dump(v, open(f"{out}/tiny-{name}.json", "w"), ensure_ascii=False, indent=2)

texts = [
    "<mask>", " <mask> ", "a<mask>b", "a <mask> b", "\t<mask>\t<mask>\u2000", "<mask><mask>", "  <mask>  x",
    "ony", "Anthony", "a ony b", "ony,", ",ony", "x ony", "ony\u0301", "_ony", "1ony",
    "my name is", "my  name", "my\u2581name", "xmy namey",
    "<a> <b>", "<a>  <b>c", "<a><b>", " <b>", "x <b> y",
    "<sw>", "x <sw> y", "x<sw>", "  <sw>  ", "a\u3000<sw>",
    "\u00e9", "caf\u00e9 cafe\u0301", "\u00e9\u00e9",
    "ab abc abcd xabcx a b",
    "Hello world", "The canvas is denoised in parallel.", " leading", "trailing ", "  two  spaces  ",
    "e", "ee", "eee eee", "  e  ", "e\u2581e", "\u2581\u2581x", "😀 😀😀 a😀b",
]
json.dump(texts, open(f"{out}/variant-strings.json", "w"), ensure_ascii=False, indent=1)
print("wrote", len(variants), "variants and", len(texts), "texts")
