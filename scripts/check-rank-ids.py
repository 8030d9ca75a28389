import json,sys,glob
d=sys.argv[1]
ranks=[json.load(open(f)) for f in sorted(glob.glob(d+'/rank-*.json'))]
n=int(sys.argv[2]); W=len(ranks)
for e in range(len(ranks[0]['epochs'])):
    ids=[i for r in ranks for i in r['epochs'][e]]
    ok = len(ids)==len(set(ids)) and len(ids)==(n//W)*W and all(0<=i<n for i in ids)
    print(f"torchrun {W} ranks, epoch {e}: {len(ids)} ids, distinct {len(set(ids))}, expected {(n//W)*W} -> {'exact partition' if ok else 'FAILED'}")
