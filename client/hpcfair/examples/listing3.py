"""The HPCFair paper's Listing 3: convert, collaborate and containerise in three calls.

Run it in this folder after putting ckpt/encoder.ckpt and ckpt/decoder.ckpt here (any torch.export
program and Keras model; see docs/getting-started/tour.md) and signing in (hpcfair login).
"""

from hpcfair import modelAPI

if __name__ == "__main__":
    api = modelAPI()
    api.conversion("conversion.yaml")
    api.collaborate("collaboration.yaml")
    api.container("container.yaml")
