"""The language-model interface: Gemma prompt rendering, grammar-constrained and free
generation behind one small protocol, with the real llama.cpp runtime and a scripted fake."""
