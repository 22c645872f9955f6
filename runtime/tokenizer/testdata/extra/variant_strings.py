#!/usr/bin/env python3
"""Prints the texts for the variant references: variant-strings.json, then the texts of the
extra reference (read from gemma3-extra-reference.json.gz).

    python3 variant_strings.py VARIANT_STRINGS_JSON EXTRA_REFERENCE_JSON_GZ > strings.json
"""
import gzip, json, sys

texts = json.load(open(sys.argv[1]))
texts += [c["text"] for c in json.load(gzip.open(sys.argv[2]))["cases"]]
json.dump(texts, sys.stdout, ensure_ascii=False)
