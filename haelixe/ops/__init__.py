"""Differentiable ops, one module per family. Each op is a Function whose forward calls
the input's backend and whose backward is written with Haelixe ops."""
