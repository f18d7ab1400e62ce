"""Small abstract models shared by the implementation, the tests and the proofs."""
