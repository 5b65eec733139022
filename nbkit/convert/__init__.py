"""The converter: a Kaggle competition's pictures + CSV -> the TFRecords the kit's notebooks read
(`python -m nbkit tfrecords`, or `nbkit.convert.run.convert(...)` in a notebook), without TensorFlow.

sources (find pictures, labels, ids), labels (CSV rows, label order, class names, split, folds),
pictures (one upright square RGB JPEG, encoded on every core, into files of ~100 MB), run
(convert: options checked, split, description), example (a generated stand-in).
"""
