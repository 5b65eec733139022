"""A small generated stand-in for Kaggle's "Contradictory, My Dear Watson", in exactly its form: `train.csv`
(id, premise, hypothesis, lang_abv, language, label), `test.csv` (the same without label) and
`sample_submission.csv` (id, prediction), 15 languages. A toy that can be learned: a hypothesis repeats
words of its premise and adds the language's "maybe" (neutral, 1) or "not" (contradiction, 2), or
nothing (entailment, 0). It checks the pipeline and that a model learns, not the model's quality."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from nbkit import atomic

# lang_abv, language, "not", "maybe", six words; English is half of the competition's rows, as here.
_LANGUAGES = (
    ("en", "English", "not", "maybe", "cat house river green runs old"),
    ("fr", "French", "pas", "peut-être", "chat maison rivière vert court vieux"),
    ("es", "Spanish", "no", "quizás", "gato casa río verde corre viejo"),
    ("de", "German", "nicht", "vielleicht", "Katze Haus Fluss grün läuft alt"),
    ("ru", "Russian", "не", "возможно", "кошка дом река зелёный бежит старый"),
    ("bg", "Bulgarian", "не", "може би", "котка къща река зелен тича стар"),
    ("el", "Greek", "δεν", "ίσως", "γάτα σπίτι ποτάμι πράσινο τρέχει παλιό"),
    ("tr", "Turkish", "değil", "belki", "kedi ev nehir yeşil koşar eski"),
    ("ar", "Arabic", "لا", "ربما", "قطة بيت نهر أخضر يجري قديم"),
    ("ur", "Urdu", "نہیں", "شاید", "بلی گھر دریا سبز دوڑتا پرانا"),
    ("hi", "Hindi", "नहीं", "शायद", "बिल्ली घर नदी हरा दौड़ता पुराना"),
    ("th", "Thai", "ไม่", "บางที", "แมว บ้าน แม่น้ำ เขียว วิ่ง เก่า"),
    ("zh", "Chinese", "不", "也许", "猫 房子 河 绿色 跑 旧"),
    ("vi", "Vietnamese", "không", "có lẽ", "mèo nhà sông xanh chạy cũ"),
    ("sw", "Swahili", "si", "labda", "paka nyumba mto kijani anakimbia mzee"),
)
_FILES = ("train.csv", "test.csv", "sample_submission.csv")


def _rows(count: int, rng: np.random.Generator) -> list[dict[str, object]]:
    share = np.r_[0.5, np.full(len(_LANGUAGES) - 1, 0.5 / (len(_LANGUAGES) - 1))]
    rows = []
    for language in rng.choice(len(_LANGUAGES), count, p=share):
        abv, name, negation, maybe, words = _LANGUAGES[language]
        premise = list(rng.choice(words.split(), rng.integers(6, 11)))
        hypothesis = list(rng.choice(premise, rng.integers(3, 6), replace=False))
        label = int(rng.integers(3))
        if label:
            hypothesis.insert(int(rng.integers(len(hypothesis) + 1)), negation if label == 2 else maybe)
        row_id = "".join(rng.choice(list("0123456789abcdef"), 10))
        rows.append(
            dict(
                id=row_id,
                premise=" ".join(premise),
                hypothesis=" ".join(hypothesis),
                lang_abv=abv,
                language=name,
                label=label,
            )
        )
    return rows


def _write(path: Path, rows: list[dict[str, object]], columns: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def make(folder: str | Path, train_rows: int = 1200, test_rows: int = 240, seed: int = 0) -> Path:
    """Write the three files into `folder` (replaced whole); the folder."""
    rng = np.random.default_rng(seed)
    train, test = _rows(train_rows, rng), _rows(test_rows, rng)
    columns = ["id", "premise", "hypothesis", "lang_abv", "language", "label"]
    with atomic.staged_dir(folder) as staging:
        _write(staging / "train.csv", train, columns)
        _write(staging / "test.csv", test, columns[:-1])
        _write(
            staging / "sample_submission.csv", [{"id": r["id"], "prediction": 0} for r in test], ["id", "prediction"]
        )
    return Path(folder)


def ensure(folder: str | Path) -> Path:
    """`folder` with the sample in it, written the first time."""
    folder = Path(folder)
    return folder if all((folder / name).is_file() for name in _FILES) else make(folder)
