"""llama.cpp's OpenAI-compatible HTTP server (from xllamacpp) on 127.0.0.1, as a process of
its own: `python tests/lm_server.py MODEL.gguf PORT`. Prints its address when ready and runs
until stdin closes."""

import os
import sys

import xllamacpp

params = xllamacpp.CommonParams()
params.model.path = sys.argv[1]
params.hostnames = ["127.0.0.1"]
params.port = int(sys.argv[2])
params.n_ctx = 4096
params.n_parallel = 1
params.cpuparams.n_threads = 1
params.cpuparams_batch.n_threads = 1
params.warmup = False
params.verbosity = -1
server = xllamacpp.Server(params)
print(server.listening_address, flush=True)
sys.stdin.read()
# xllamacpp's destructor joins its HTTP threads, which wait on clients' kept-alive connections:
# leave without it, as mhindex itself never destroys a server (see mhindex/lm/llamacpp.py).
os._exit(0)
