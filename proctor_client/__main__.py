"""`python -m proctor_client ...`: the `proctor remote` commands where only the client is installed."""

from proctor_client.cli import remote

if __name__ == "__main__":
    remote(prog_name="python -m proctor_client")
