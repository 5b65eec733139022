"""Language models. Notebook 10 (Gemma fine-tuned with LoRA over a mesh): data (the prompt/response pairs
read and checked, the generated sample), sharding (MESH, the memory plan, the layout rules and the check
after the build). Notebook 11 (GRPO through Tunix): rl (questions, tokenizer, rewards, checkpoints' settings,
the time budget) and gemma (MODEL, its config, the mesh against Tunix's sharding, the memory plan)."""
