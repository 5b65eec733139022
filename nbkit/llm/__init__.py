"""Language models (notebooks 10 and 11): model_sizes (a Gemma's sizes, one description from a KerasHub preset's
config, a Hugging Face config.json or Tunix's), planning (the mesh and the one memory plan of fine-tuning and GRPO),
data (the prompt/response pairs and GSM8K-style questions read and checked, the held-out split, the generated
samples), sharding (notebook 10's layout rules for KerasHub and the check after the build), gemma (notebook 11's
MODEL found, its config.json read for Tunix and checked against the weights), rl (the glue around Tunix's GRPO:
rewards, the run's checkpoints and settings, the tokenizer and prompts checked, the time budget) and export (the
trained model written and completed for Hugging Face transformers). Notebook 12 (a test set answered): answers (the
test file, the sample submission, batches by length, submission.csv) and engines (ENGINE, the model folder checked,
the tiny stand-in)."""
