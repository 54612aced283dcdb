"""What bad input and bad luck do: fuzzing, server abuse, the API contract, a kill during a save."""
