"""ReCall's clients of a FlashRAG retrieval server, from Agent-RL/ReCall at commit
aaf16b31c83702cdd3c7f7a0ad431efce7904b63 (MIT License):

- `wikipedia_search_env`: data/prepare_musique_recall.py, lines 10-25, as it is: the tool code ReCall's training
  data carries and its sandbox runs, the placeholder replaced with the server's address as
  src/verl/utils/dataset/rl_dataset.py line 250 does (`search_url`).
- `retry`, `_search`, `_batch_search`: src/flashrag/retriever/retriever.py, lines 432-466 (`RemoteRetriever`'s two
  methods as functions, `self.remote_url` and `self.topk` their arguments): what its FlashRAG pipelines call.
"""
import time
from functools import wraps
from typing import List

import requests

wikipedia_search_env = """import requests

def wikipedia_search(query: str, top_n: int = 5):
    url = "<search-url-placeholder>/search"
    
    if query == '':
        return 'invalid query'
    
    data = {'query': query, 'top_n': top_n}
    response = requests.post(url, json=data)
    retrieval_text = ''
    for line in response.json():
        retrieval_text += f"{line['contents']}\\n\\n"
    retrieval_text = retrieval_text.strip()
    
    return retrieval_text"""


def retry(max: int=10, sleep: int=1):
    def decorator(func):
        @wraps(func)
        def wrapper(*args, **kwargs):
            for i in range(max):
                try:
                    return func(*args, **kwargs)
                except Exception as e:
                    if i == max - 1:
                        print(f"Retry {func.__name__} failed after {max} times")
                    elif sleep:
                        time.sleep(sleep)
        return wrapper
    return decorator


@retry(max=10, sleep=1)
def _search(remote_url, topk, query: str, num: int = None, return_score=False):
    if num is None:
        num = topk
    url = f"{remote_url}/search"
    response = requests.post(url, json={"query": query, "top_n": num, "return_score": return_score})
    return response.json()


@retry(max=10, sleep=1)
def _batch_search(remote_url, topk, query: List[str], num: int = None, return_score=False):
    if num is None:
        num = topk
    url = f"{remote_url}/batch_search"
    response = requests.post(url, json={"query": query, "top_n": num, "return_score": return_score})
    return response.json()
