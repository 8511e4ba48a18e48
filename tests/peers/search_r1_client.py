"""Search-R1's retrieval client, from PeterGriffinJin/Search-R1 at commit
a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06 (Apache License 2.0,
http://www.apache.org/licenses/LICENSE-2.0):

- `batch_search`, `_batch_search`, `_passages2string`: methods of `LLMGenerationManager` in
  search_r1/llm_agent/generation.py, lines 438-469, as functions: `self.config.search_url` and
  `self.config.topk` are arguments. This is what PPO and GRPO training call every search step.
- `retrieval_request_payload`: the payload of search_r1/search/retrieval_request.py, lines 7-11.
"""

import requests


def batch_search(search_url, topk, queries):
    """
    Batchified search for queries.
    Args:
        queries: queries to call the search engine
    Returns:
        search results which is concatenated into a string
    """
    results = _batch_search(search_url, topk, queries)['result']

    return [_passages2string(result) for result in results]


def _batch_search(search_url, topk, queries):

    payload = {
        "queries": queries,
        "topk": topk,
        "return_scores": True
    }

    return requests.post(search_url, json=payload).json()


def _passages2string(retrieval_result):
    format_reference = ''
    for idx, doc_item in enumerate(retrieval_result):

        content = doc_item['document']['contents']
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        format_reference += f"Doc {idx+1}(Title: {title}) {text}\n"

    return format_reference


def retrieval_request_payload():
    return {
        "queries": ["What is the capital of France?", "Explain neural networks."] * 200,
        "topk": 5,
        "return_scores": True
    }
