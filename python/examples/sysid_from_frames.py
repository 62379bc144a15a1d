"""System identification from footage, from Python.

Renders footage of the bundled sysid-beam-mu scene (a beam sagging under
gravity) with a known shear modulus through the package, quantises it to
8-bit frames as a camera would deliver them, writes them to a folder of PNGs
(with frames.json holding their times), then identifies the modulus from
that folder and the camera, starting from a wrong guess, and prints the
true and estimated values with the relative error.

    python3 python/examples/sysid_from_frames.py [--mu 1234] [--init 700] [--folder DIR] [--log RUN.h5]

`dsim info RUN.h5` then shows the identification's log (loss, error per
iteration); `dsim export` of a `dsim sysid` log gives such a folder too.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsim  # noqa: E402

CONFIG = "sysid-beam-mu"
PARAM = "tet.k_mu"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mu", type=float, default=1234.0, help="true shear modulus of the footage, Pa")
    ap.add_argument("--init", type=float, default=700.0, help="initial guess, Pa")
    ap.add_argument("--folder", help="where to write the PNG frames (default: a temporary folder)")
    ap.add_argument("--log", help="write the identification's run log (HDF5) here")
    a = ap.parse_args()

    # 1. footage with a known value: simulated and rendered by the package
    shot = dsim.render_footage(CONFIG, {PARAM: a.mu})
    frames8 = (np.clip(shot["frames"], 0, 1) * 255 + 0.5).astype(np.uint8)
    folder = a.folder or tempfile.mkdtemp(prefix="dsim-footage-")
    dsim.save_frames(folder, frames8, shot["times"])
    print(f"footage: {len(frames8)} frames of {frames8.shape[2]} x {frames8.shape[1]} in {folder}, "
          f"camera at {np.round(shot['camera']['position'], 3).tolist()}, fov {shot['camera']['fov']}")

    # 2. identification from the folder (times from its frames.json) and the camera
    res = dsim.sysid(CONFIG, frames=folder, camera=shot["camera"],
                     params=[{"name": PARAM, "lower": 10, "upper": 1e5, "init": a.init}],
                     optimizer="lbfgs", lr=0.5, iterations=30, log=a.log, overwrite=True)
    est = res.estimates[PARAM]
    print(f"{len(res.loss)} iterations, loss {res.loss[0]:.4g} -> {res.best_loss:.4g} ({res.stop_reason})")
    print(f"{PARAM}: true {a.mu:.6g}, initial {a.init:.6g}, estimated {est:.6g}, "
          f"relative error {abs(est - a.mu) / a.mu:.3g}")
    if res.log:
        print(f"run log: {res.log}")


if __name__ == "__main__":
    main()
