#!/usr/bin/env python3
"""Writes a synthetic COCO keypoints table the size of person_keypoints_train2017.json
(about 120k images, 250k annotations, ~240 MB), for timing `load_table` (docs/performance.md).

Each annotation has a bbox, 17x3 keypoints, a polygon segmentation of ~90 coordinates (one in
ten a crowd RLE), area, iscrowd, num_keypoints, category_id; written on one line, as COCO's
own files are.
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=120_000)
    ap.add_argument("--annotations", type=int, default=250_000)
    ap.add_argument("--polygon", type=int, default=90, help="coordinates per polygon")
    args = ap.parse_args()
    rnd = random.Random(14)
    images = [{"license": 1, "file_name": f"{i:012d}.jpg", "coco_url": f"http://images.cocodataset.org/train2017/{i:012d}.jpg",
               "height": 480, "width": 640, "date_captured": "2013-11-14 16:28:13", "id": i}
              for i in range(1, args.images + 1)]
    anns = []
    for a in range(args.annotations):
        x, y, w, h = (round(rnd.uniform(0, 500), 2), round(rnd.uniform(0, 300), 2),
                      round(rnd.uniform(10, 140), 2), round(rnd.uniform(10, 180), 2))
        kps = []
        for _ in range(17):
            v = rnd.choice((0, 1, 2))
            kps += [rnd.randint(0, 640), rnd.randint(0, 480), v] if v else [0, 0, 0]
        if a % 10 == 9:
            seg = {"counts": [rnd.randint(0, 999) for _ in range(40)], "size": [480, 640]}
        else:
            seg = [[round(rnd.uniform(0, 640), 2) for _ in range(args.polygon)]]
        anns.append({"segmentation": seg, "num_keypoints": sum(1 for k in kps[2::3] if k),
                     "area": round(w * h, 4), "iscrowd": int(a % 10 == 9), "keypoints": kps,
                     "image_id": rnd.randint(1, args.images), "bbox": [x, y, w, h],
                     "category_id": 1, "id": 100000 + a})
    doc = {"info": {"description": "synthetic COCO keypoints (tarmac bench)", "year": 2026},
           "licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", "id": 1, "name": "CC BY"}],
           "images": images, "annotations": anns,
           "categories": [{"supercategory": "person", "id": 1, "name": "person",
                           "keypoints": ["nose", "left_eye", "right_eye", "left_ear", "right_ear",
                                         "left_shoulder", "right_shoulder", "left_elbow",
                                         "right_elbow", "left_wrist", "right_wrist", "left_hip",
                                         "right_hip", "left_knee", "right_knee", "left_ankle",
                                         "right_ankle"],
                           "skeleton": [[16, 14], [14, 12], [17, 15], [15, 13], [12, 13]]}]}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
