"""Image classification from TFRecords in the kit's layout: the generic part of the kit, for any
competition's pictures (what is one competition's lives in `nbkit.competitions`).

Framework-free: `description` (the dataset's nbkit-dataset.json: classes, label values, submission
columns, metric, folds), `layout` (folders, names, counts), `checks` (every record read before
training, through `nbkit.tfrecord`), `writer` and `sample` (a generated learnable sample), `augment`
(the flips both stacks apply), `recipe` (profiles and the learning-rate schedule), `metrics`
(scores, the competition's metric; metrics.json, submission.csv checked against the sample submission,
oof.csv), `plots`. TensorFlow/Keras: `pipeline` (tf.data input),
`predict` (predictions in file order), `monitor` (input-wait callback).
"""
