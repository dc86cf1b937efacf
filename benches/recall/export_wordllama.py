"""Writes src/recall/words.bin, the word vectors recall's meaning signal is built from.

WordLlama (MIT licence, github.com/dleemiller/WordLlama) ships in its PyPI wheel a table of
token embeddings distilled from large language models for sentence similarity:
`wordllama/weights/l2_supercat_256.safetensors`, 32,000 tokens of the Llama 2 vocabulary by 256
dimensions, trained so that the first 64 dimensions alone are a smaller model. This keeps the
tokens that are whole words (a leading "▁" and nothing but ASCII letters and digits after it),
lower-cased, the first of each, and their first 64 dimensions, each word's vector stored as 64
signed bytes with one scale:

    u32 LE count, u32 LE dimensions (64)
    count x f32 LE scale
    count x 64 i8 (a word's vector is scale * bytes / 127)
    the words, in byte order, each followed by "\n"

    pip download --no-deps wordllama==0.4.0.post1 -d /tmp/wl
    cd /tmp/wl && unzip -o wordllama-*.whl 'wordllama/weights/*' 'wordllama/tokenizers/*'
    python3 -m venv venv && venv/bin/pip install safetensors numpy
    venv/bin/python benches/recall/export_wordllama.py /tmp/wl/wordllama > src/recall/words.bin

The weights file's SHA-256 is 64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5,
the tokenizer's 93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68.
"""

import json
import os
import struct
import sys

import numpy
from safetensors.numpy import load_file

DIMENSIONS = 64

root = sys.argv[1]
table = load_file(os.path.join(root, "weights/l2_supercat_256.safetensors"))["embedding.weight"]
table = table.astype(numpy.float32)[:, :DIMENSIONS]
config = os.path.join(root, "tokenizers/l2_supercat_tokenizer_config.json")
vocabulary = json.load(open(config))["model"]["vocab"]
first = {}
for piece, token in sorted(vocabulary.items(), key=lambda item: item[1]):
    word = piece[1:].lower()
    if piece.startswith("\u2581") and word.isascii() and word.isalnum() and word not in first:
        first[word] = token
words = sorted(first, key=lambda w: w.encode())
out = sys.stdout.buffer
out.write(struct.pack("<II", len(words), DIMENSIONS))
vectors = [table[first[w]] for w in words]
scales = [float(numpy.abs(v).max()) or 1.0 for v in vectors]
out.write(struct.pack(f"<{len(words)}f", *scales))
for v, scale in zip(vectors, scales):
    out.write(numpy.round(v / scale * 127).astype(numpy.int8).tobytes())
for w in words:
    out.write(w.encode() + b"\n")
