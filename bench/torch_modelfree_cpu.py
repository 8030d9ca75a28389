# Model-free CPU loop over stoker.torch (shared memory), batch 256, CIFAR-shaped synthetic data: samples/s and the CPU time per
# batch of each side (the client process; the loader process, all its threads, from /proc). REPO=<checkout> picks whose
# client and server run, so two checkouts compare in one session: REPO=/path/to/old python3 bench/torch_modelfree_cpu.py
import sys, time, os
sys.path.insert(0, os.environ.get("REPO", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")) + "/python")
import torch
import stoker.torch as st
N=int(os.environ.get("N", 50000)); B=256
l = st.DataLoader(source=st.synthetic(n=N), batch_size=B, device="cpu", shuffle=True, drop_last=True, seed=1)
pid = l._proc.pid
tick = os.sysconf("SC_CLK_TCK")
def srv_cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
def run(epochs):
    n=0
    for e in range(epochs):
        for b in l:
            b["image"].view(-1)[:64].sum(); n += b.rows
    return n
run(1)
c0=time.process_time(); s0=srv_cpu(); t=time.perf_counter(); n=run(int(os.environ.get("EPOCHS",6))); dt=time.perf_counter()-t
c=time.process_time()-c0; s=srv_cpu()-s0; nb=n/B
print(f"model-free cpu: {n/dt:.0f} samples/s wall; CPU per batch: client {c/nb*1e6:.1f} us, server {s/nb*1e6:.1f} us (all its threads)")
l.close()
