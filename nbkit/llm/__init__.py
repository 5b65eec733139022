"""Language models (notebook 10: Gemma fine-tuned with LoRA over a mesh): data (the prompt/response pairs
read and checked, the generated sample), sharding (MESH, the memory plan, the layout rules and the check
after the build)."""
