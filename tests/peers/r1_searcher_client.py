"""R1-Searcher's request to its retrieval server and its reading of the answer, from RUCAIBox/R1-Searcher at commit
631167cbb3c2464f805730e3e364a690f5b136d4 (MIT License): evaluation/eval_search_loacl.py, lines 265-281, inline in
its evaluation loop (`main`); here a function of the server's URL, the queries and k that returns each query's
documents block as the loop writes it into the prompt (`doc_content`), or None where the status is not 200 (the
loop's `retrieve_error`). The loop's own lines are kept as they are; only the prompt bookkeeping around them is
left out.
"""
import re

import requests


def documents_blocks(url_wiki, query_list, topk):
    blocks = []
    response = requests.post(url_wiki, json={"queries": query_list, "k": topk})
    if response.status_code == 200:
        result = response.json()
        answers = result["answers"]
        for i in range(len(answers)):
            retrieve_docs = answers[i]
            if len(retrieve_docs)>0:
                doc_content_list = []
                for j in range(len(retrieve_docs)):
                    doc_now = re.sub(r'^\d+\s+', '', retrieve_docs[j])
                    doc_content_list.append(f"({j+1}){doc_now}\n")
                doc_content = ''.join(doc_content_list)

            else:
                doc_content = "None"
            blocks.append(doc_content)
        return blocks
    return None
