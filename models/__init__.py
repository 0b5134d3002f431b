"""Model profiles, file verification and the shipped default model's assembly."""
