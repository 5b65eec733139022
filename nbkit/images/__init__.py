"""Image classification from TFRecords: the generic part of the kit (any competition's images)."""
