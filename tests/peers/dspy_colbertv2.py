"""DSPy's ColBERTv2 client, from stanfordnlp/dspy at commit
4ed377ee9110e912d4f5e1be43b317b87455053c, dspy/dsp/colbertv2.py, lines 11-84 (MIT License,
Copyright (c) 2023 Stanford Future Data Systems; the licence text is reproduced below).
Changes: the `request_cache` decorators are left out (they cache answers on disk) and `dotdict`
is a plain dict.

MIT License

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions: The above copyright notice and this
permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
"""

from typing import Any

import requests

dotdict = dict


class ColBERTv2:
    """Wrapper for the ColBERTv2 Retrieval."""

    def __init__(
        self,
        url: str = "http://0.0.0.0",
        port: str | int | None = None,
        post_requests: bool = False,
    ):
        self.post_requests = post_requests
        self.url = f"{url}:{port}" if port else url

    def __call__(
        self,
        query: str,
        k: int = 10,
        simplify: bool = False,
    ) -> list[str] | list[dotdict]:
        if self.post_requests:
            topk: list[dict[str, Any]] = colbertv2_post_request(self.url, query, k)
        else:
            topk: list[dict[str, Any]] = colbertv2_get_request(self.url, query, k)

        if simplify:
            return [psg["long_text"] for psg in topk]

        return [dotdict(psg) for psg in topk]


def colbertv2_get_request_v2(url: str, query: str, k: int):
    assert k <= 100, "Only k <= 100 is supported for the hosted ColBERTv2 server at the moment."

    payload = {"query": query, "k": k}
    res = requests.get(url, params=payload, timeout=10)
    res.raise_for_status()

    res_json = res.json()
    if res_json.get("error"):
        error_message = res_json.get("message", "Unknown error")
        raise ValueError(f"ColBERTv2 server returned an error: {error_message}")
    if "topk" not in res_json:
        raise ValueError(f"ColBERTv2 server returned an unexpected response: {res_json}")

    topk = res_json["topk"][:k]
    topk = [{**d, "long_text": d["text"]} for d in topk]
    return topk[:k]


colbertv2_get_request = colbertv2_get_request_v2


def colbertv2_post_request_v2(url: str, query: str, k: int):
    headers = {"Content-Type": "application/json; charset=utf-8"}
    payload = {"query": query, "k": k}
    res = requests.post(url, json=payload, headers=headers, timeout=10)
    res.raise_for_status()

    res_json = res.json()
    if res_json.get("error"):
        error_message = res_json.get("message", "Unknown error")
        raise ValueError(f"ColBERTv2 server returned an error: {error_message}")
    if "topk" not in res_json:
        raise ValueError(f"ColBERTv2 server returned an unexpected response: {res_json}")

    return res_json["topk"][:k]


colbertv2_post_request = colbertv2_post_request_v2
