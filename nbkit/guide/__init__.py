"""Notebook 01's material, TensorFlow's TPU guide made runnable: `mnist` (the data, or a learnable
stand-in) and `custom_loop` (a multi-step custom training loop for tf.distribute strategies)."""
