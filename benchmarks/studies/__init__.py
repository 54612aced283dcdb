"""The studies that chose today's recipes; README.md says which decision each made."""
