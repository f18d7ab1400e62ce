"""The verification machinery: exhaustive exploration, inductive kernels, Promela.

Read in this order:

1. `admission_models` -- the admission protocols and their broken variants as
   transition systems, in a plain and a compact encoding.
2. `search` -- the breadth-first search: worst cases, witnesses, spurious rejections.
3. `tokens` and `lease` -- the token-limit and lease models on the same search.
4. `inductive` -- the scalar kernels the CrossHair obligations in `proofs/` are made of.
5. `promela` -- the compact model written for Spin, the explorer's second engine.
"""
