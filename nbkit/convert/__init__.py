"""The converter: a Kaggle competition's pictures + CSV -> the TFRecords the kit's notebooks read
(`python -m nbkit tfrecords`, or `nbkit.convert.run.convert(...)` in a notebook), without TensorFlow.

sources (find pictures, labels, ids), labels (CSV rows, label order, class names), pictures (one
upright square RGB JPEG), split (validation split, folds, order), shards (files of ~100 MB),
workers (every core, progress), options (checked), run (convert), example (a generated stand-in).
"""
