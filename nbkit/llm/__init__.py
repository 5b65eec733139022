"""Language models. Notebook 10 (Gemma fine-tuned with LoRA over a mesh): data (the prompt/response pairs
read and checked, the generated sample), sharding (MESH, the memory plan, the layout rules and the check
after the build). Notebook 11 (GRPO through Tunix): rl (questions, tokenizer, rewards, checkpoints' settings,
the time budget) and gemma (MODEL, its config, the mesh against Tunix's sharding, the memory plan); export (the
model folders transformers reads). Notebook 12 (a test set answered): answers (the test file, the sample
submission, batches by length, submission.csv) and engines (ENGINE, the model folder checked, the tiny stand-in)."""
