"""The programs the package carries, and where a build folder has each:
read by ps.programs and by setup.py (which cannot import the package before
its extension is built, so this file imports nothing)."""

BUILD_TREE = {"ps_server": "server/ps_server",
              "ps_datagen": "worker/datagen/ps_datagen",
              "ps_serve": "serving/ps_serve",
              "ps_ckpt": "checkpoint/ps_ckpt"}
