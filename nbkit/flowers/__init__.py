"""Kaggle's "Flower Classification with TPUs", used by notebooks 02, 04, 05 and 06.

Framework-free: `layout` (folders, names, classes), `checks` (every record read before training,
through `nbkit.tfrecord`), `writer` and `sample` (the generated sample), `source` (where the data comes from), `augment` (the flips both stacks apply),
`recipe` (profiles, learning-rate schedule, epoch plan), `evaluate` (scores, submission), `plots`.
TensorFlow/Keras: `pipeline` (tf.data input), `predict` (predictions in file order), `monitor`
(input-wait callback).
"""
