#!/usr/bin/env python3
"""Write the corpus of the converging test checkpoint (testdata/converging): sentences about a small fixed
world of 48 people, so that a 3 M-parameter DiffusionGemma can become confident about most of every block.

Every sentence names one person (a uniformly random choice) in one of four templates (a uniformly random
choice); everything else in the sentence is fixed by the person: home town, trade, father and number of
sons are drawn once, from seed 1, when the world is built. A block of text therefore has a few genuinely
uncertain positions (who comes next, and in which template) and many determined ones: the sampler has to
resolve the choices one by one, which is what makes its step count depend on the model's precision.

    python3 testdata/tools/facts_corpus.py OUTDIR

writes OUTDIR/train.txt (seed 2, 6,000 lines), OUTDIR/heldout.txt (seed 3, 200 lines) and
OUTDIR/calib.txt (seed 4, 200 lines); a line is 24 sentences. Python's random module (Mersenne Twister) is
deterministic across platforms for these calls (random.Random(seed).choice / randrange / shuffle), so the
files are byte-identical wherever the script runs; their sha256 are in testdata/converging/PROVENANCE.md.
"""
import os
import random
import sys

NAMES = ["Abner", "Asher", "Boaz", "Caleb", "Dathan", "Eli", "Enoch", "Ezra", "Gad", "Gideon", "Hiram",
         "Hosea", "Ira", "Jabez", "Jesse", "Joab", "Jonah", "Laban", "Levi", "Lot", "Micah", "Nahum", "Nathan",
         "Obed", "Omri", "Reuben", "Samson", "Saul", "Seth", "Shem", "Simeon", "Tobiah", "Uriah", "Zadok",
         "Zimri", "Amos", "Aaron", "Ehud", "Elon", "Hur", "Jair", "Kish", "Mesha", "Nadab", "Oren", "Pekah",
         "Ithiel", "Jether"]
FATHERS = ["Adam", "Noah", "Terah", "Nahor", "Jared", "Lamech", "Peleg", "Serug", "Eber", "Arphaxad",
           "Shelah", "Kenan", "Mahalalel", "Methuselah", "Enos", "Reu"]
CITIES = ["Hebron", "Shiloh", "Bethel", "Gilgal", "Jericho", "Dan", "Gaza", "Tyre", "Sidon", "Zoar", "Ramah",
          "Mizpah"]
TRADES = ["potter", "smith", "shepherd", "weaver", "fisher", "mason", "scribe", "baker", "tanner", "carpenter",
          "vinedresser", "merchant"]
COUNTS = ["two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEMPLATES = [
    "{n} of {c} was a {t}.",
    "{n} the son of {f} had {k} sons.",
    "And {n} went up to {c}, for he was a {t} there.",
    "The sons of {n} were {k}, and they dwelt in {c}.",
]


def world():
    r = random.Random(1)
    return {n: dict(n=n, c=r.choice(CITIES), t=r.choice(TRADES), f=r.choice(FATHERS), k=r.choice(COUNTS))
            for n in NAMES}


def lines(seed, count, per_line=24):
    w, r = world(), random.Random(seed)
    out = []
    for _ in range(count):
        out.append(" ".join(r.choice(TEMPLATES).format(**w[r.choice(NAMES)]) for _ in range(per_line)))
    return out


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, seed, count in (("train.txt", 2, 6000), ("heldout.txt", 3, 200), ("calib.txt", 4, 200)):
        with open(os.path.join(out, name), "w", encoding="ascii") as fh:
            fh.write("".join(l + "\n" for l in lines(seed, count)))


if __name__ == "__main__":
    main()
