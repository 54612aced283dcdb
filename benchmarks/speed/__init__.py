"""How fast and how lean: pre-training, inference engines, the CLI, the server under load, a GPU."""
