#!/usr/bin/env python3
"""Writes strings.json: the texts of the extra reference (seeded, reproducible).

    python3 make_strings.py > strings.json
"""
import json, random

rng = random.Random(20261130)
pools = {
    "ascii": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "space": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u200b"],
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "—", "–", "“", "”", "‘", "’", "«", "»", "¿", "¡", "•", "…"],
    "latin": list("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœŒÀÉÖÜĀāăąćčďđēėęěğīįıłńňōőřśšťūůűųźżž"),
    "combining": ["e\u0301", "a\u0308", "o\u0302\u0323", "\u0301", "\u0300\u0301\u0302", "n\u0303", "\u094d", "क\u094d\u0937"],
    "cjk": list("日本語のテキストと中文文本还有한국어漢字仮名カタカナひらがな我你他们的是不了人在有这上大来") + ["你好世界", "こんにちは", "안녕하세요"],
    "other": list("Ωαβγδεζηθλμπστφψωабвгдежзийклмнопрстуфхцчшщъыьэюяאבגדהوזחطيكلمنسعفصقرشتהאعربيةहिन्दीไทย"),
    "emoji": ["🤖", "🚀", "👩\u200d👩\u200d👧\u200d👦", "👍🏽", "🇫🇷", "❤️", "😀", "🧑\u200d💻", "\ufe0f", "🫠"],
    "rare": ["𝔘", "𝔫", "𝔦", "𝔠", "𝔬", "𝔡", "𝔢", "𓀀", "𐍈", "🀄", "\U000f0000", "\U0010fffd", "\ue000", "\ufffd", "\ufeff"],
    "control": [chr(c) for c in list(range(0, 32)) + [127, 0x80, 0x85, 0x9f]],
    "meta": ["▁", "▁▁", "▁a", "a▁", "<0x41>", "<0xZZ>", "<0x+1>", "<unk>", "<pad>", "<bos>", "<eos>", "<mask>",
              "[multimodal]", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
              "<image_soft_token>", "<unused0>", "<unused99>", "<unused6241>", "<start_of", "<start_of_turn",
              "end_of_turn>", "<<bos>>", "<bos", "bos>"],
    "words": ["the", " the", "The", " quick", " brown", "fox", " jumps", "over", "lazy", "dog", "hello", "world",
              "tokenizer", "diffusion", "Gemma", "denoised", "parallel", "canvas", "self.", "torch.", "model",
              "config", "layer", "return", "def", "import", " = ", "==", "->", "=>", "{}", "[]", "()", "0x7fff",
              "3.14159", "1e-6", "-42", "1234567890", "http://example.com/a?b=c&d=e", "C:\\path\\file.txt"],
}
names = list(pools)
texts = []
# Each pool alone, joined.
for n in names:
    texts.append("".join(pools[n]))
# Random mixtures of increasing length.
for i in range(360):
    length = rng.choice([1, 2, 3, 5, 8, 13, 21, 34, 55, 89])
    weights = [rng.random() for _ in names]
    parts = []
    for _ in range(length):
        n = rng.choices(names, weights)[0]
        parts.append(rng.choice(pools[n]))
    texts.append("".join(parts))
# Runs, long words and edge shapes.
for ch in ["a", " ", "\n", "\t", "▁", "0", "é", "日", "🤖", "𝔘", "<bos>", "\x00", "ab", "a b", " \n", "\n "]:
    for n in [1, 2, 7, 31, 32, 33, 65]:
        texts.append(ch * n)
texts += ["", " ", "  ", "\n", "a", " a", "a ", " a ", "\ta", "a\t", "<bos>", " <bos> ", "<bos>a", "a<bos>"]
# A few KB of prose and code.
prose = ("Diffusion language models denoise a whole canvas of tokens in parallel instead of writing one token "
         "after another. Each step the model predicts every masked position, keeps the most confident ones and "
         "masks the rest again, until the canvas is clean. ")
code = ("def forward(self, x: torch.Tensor) -> torch.Tensor:\n    h = self.norm(x)\n    for layer in self.layers:\n"
        "        h = layer(h)  # residual inside\n    return self.head(h)\n\n")
texts.append(prose * 12)
texts.append(code * 12)
texts.append((prose + code) * 6 + "<end_of_turn>\n" + "日本語のテキスト。" * 40)
seen, out = set(), []
for t in texts:
    if t not in seen:
        seen.add(t)
        out.append(t)
json.dump(out, open(1, "w"), ensure_ascii=False, indent=1)
