#!/usr/bin/env python3
"""The sentencepiece side of tests/models/test_tokenizer_sentencepiece.cpp.

Usage: sentencepiece_reference.py MODEL TEXTS IDS
Encodes each NUL-separated text of the file TEXTS with the SentencePiece model
MODEL (Debian's python3-sentencepiece) and writes its ids to IDS, one text a
line, space-separated.
"""
import sys

import sentencepiece


def main():
    model, texts, ids = sys.argv[1:4]
    processor = sentencepiece.SentencePieceProcessor(model_file=model)
    with open(texts, "rb") as f:
        data = f.read()
    with open(ids, "w") as out:
        for text in data.split(b"\0"):
            out.write(" ".join(str(i) for i in processor.encode(text)) + "\n")


if __name__ == "__main__":
    main()
