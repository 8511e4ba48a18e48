"""IRCoT's retriever clients, from StonyBrookNLP/ircot at commit
3c1820f698eea5eeddb4fba3c56b64c961e063e4 (Apache License 2.0,
http://www.apache.org/licenses/LICENSE-2.0):

- `is_reasoning_sentence`, `remove_reasoning_sentences`: commaqa/inference/ircot.py, lines 30-45,
  verbatim.
- `remove_wh_words`, `safe_post_request`: commaqa/inference/ircot.py, lines 48-62, verbatim.
- `question_or_last_generated_sentence`: the query source of that name in
  `RetrieveAndResetParagraphsParticipant.query` (lines 327-333), as a function of its state.
- `bm25_retrieve`: the "bm25" branch of `RetrieveAndResetParagraphsParticipant.query`
  (commaqa/inference/ircot.py, lines 430-505), with the participant's state as arguments and
  its de-duplication by fuzzy match left out (it only drops paragraphs already collected).
- `map_to_titles`: the "map_generated_to_valid_titles" branch of the same method (lines 365-425),
  likewise.
- `AnnotationRetriever`: `Retriever` of prompt_generator/attach_data_annotations.py, lines 45-92,
  verbatim but for its name.

Changes are limited to what is said above: state passed in, no participant class.
"""

import json
import re
import time
from typing import List

import requests


def is_reasoning_sentence(sentence: str) -> bool:
    starters = ["thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence"]
    for starter in starters:
        if sentence.lower().startswith(starter):
            return True

    regex = re.compile("(.*)(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)(.*)")
    match = bool(re.match(regex, sentence))
    if match:
        return True

    return False


def remove_reasoning_sentences(sentences: List[str]) -> List[str]:
    return [sentence for sentence in sentences if not is_reasoning_sentence(sentence)]


def question_or_last_generated_sentence(question, generated_sentences):
    # add question to query only if generated sentences are empty. O/w use last_generated_sentence.
    generated_sentences = remove_reasoning_sentences(generated_sentences)
    last_generated_sentence_str = generated_sentences[-1].strip() if generated_sentences else ""
    input_query = last_generated_sentence_str if last_generated_sentence_str else question
    return input_query


def safe_post_request(url, params):
    for _ in range(10):
        try:
            return requests.post(url, json=params)
        except:
            print("Post request didn't succeed. Will wait 20s and retry.")
            time.sleep(20)
    raise Exception("Post request couldn't succeed after several attempts.")


def remove_wh_words(text: str) -> str:
    wh_words = {"who", "what", "when", "where", "why", "which", "how", "does", "is"}
    words = [word for word in text.split(" ") if word.strip().lower() not in wh_words]
    text = " ".join(words)
    return text


def bm25_retrieve(retriever_host, retriever_port, source_corpus_name, input_query, retrieval_count, document_type, valid_titles=None):
    """Returns (titles, paras) as the participant collects them, or raises as it does."""
    selected_titles, selected_paras = [], []
    retrieval_method = "retrieve_from_elasticsearch"
    input_query = remove_wh_words(input_query)

    params = {
        "retrieval_method": retrieval_method,
        "query_text": input_query,
        "max_hits_count": retrieval_count,
        "corpus_name": source_corpus_name,
    }
    params["document_type"] = document_type
    if valid_titles is not None:
        params["allowed_titles"] = valid_titles

    url = retriever_host.rstrip("/") + ":" + str(retriever_port) + "/retrieve"
    result = safe_post_request(url, params)

    if result.ok:
        result = result.json()
        retrieval = result["retrieval"]
        for retrieval_item in retrieval:
            if retrieval_item["corpus_name"] != source_corpus_name:
                raise Exception(
                    f"The retrieved corpus name {retrieval_item['corpus_name']} "
                    f"doesn't match {source_corpus_name}."
                )
            if len(retrieval_item["paragraph_text"].split(" ")) > 600:
                print("WARNING: Discarding a retrieved paragraph as it's excessively long.")
                continue
            if valid_titles is not None:
                assert retrieval_item["title"].lower().replace(" ", "") in [
                    valid_title.lower().replace(" ", "") for valid_title in valid_titles
                ]
            selected_titles.append(retrieval_item["title"])
            selected_paras.append(retrieval_item["paragraph_text"])
        return selected_titles, selected_paras, True
    return selected_titles, selected_paras, False


def map_to_titles(retriever_host, retriever_port, source_corpus_name, input_query, retrieval_count):
    """The titles a generated list of page names maps to (IIRC's first step)."""
    selected_titles, selected_paras = [], []
    try:
        # Assuming input_query will be of form: '["title3", "title7"]''
        generated_titles = json.loads(input_query)
    except:
        generated_titles = [
            e.strip() for e in input_query.strip().replace('"', "").replace("[", "").replace("]", "").split(",")
        ]
    for generated_title in generated_titles:
        params = {
            "retrieval_method": "retrieve_from_elasticsearch",
            "query_text": generated_title,
            "max_hits_count": retrieval_count,
            "document_type": "title",
            "corpus_name": source_corpus_name,
        }
        url = retriever_host.rstrip("/") + ":" + str(retriever_port) + "/retrieve"
        result = safe_post_request(url, params)
        if result.ok:
            result = result.json()
            retrieval = result["retrieval"]
            if not retrieval:
                continue
            for retrieval_ in retrieval:
                selected_title = retrieval_["title"]
                selected_para = retrieval_.get("paragraph_text", "")  # backoff for natcq
                if retrieval_["corpus_name"] != source_corpus_name:
                    raise Exception(
                        f"The retrieved corpus name {retrieval_['corpus_name']} "
                        f"doesn't match {source_corpus_name}."
                    )
                if selected_title not in selected_titles:
                    selected_titles.append(selected_title)
                    selected_paras.append(selected_para)
    return selected_titles


class AnnotationRetriever:
    def __init__(self, host: str, port: int, source_corpus_name: str) -> None:
        self._host = host
        self._port = port
        assert source_corpus_name in ("hotpotqa", "2wikimultihopqa", "musique", "iirc")
        self._source_corpus_name = source_corpus_name

    def retrieve(self, allowed_title: str, query_text: str):

        params = {
            "retrieval_method": "retrieve_from_elasticsearch",
            "query_text": query_text,
            "max_hits_count": 50,
            "document_type": "paragraph_text",
            "allowed_titles": [allowed_title],
            "corpus_name": self._source_corpus_name,
        }
        url = self._host.rstrip("/") + ":" + str(self._port) + "/retrieve"
        result = requests.post(url, json=params)

        selected_titles = []
        selected_paras = []
        unique_retrieval = []
        if result.ok:

            result = result.json()
            retrieval = result["retrieval"]

            for retrieval_item in retrieval:

                if retrieval_item["corpus_name"] != self._source_corpus_name:
                    raise Exception(
                        f"The retrieved corpus name {retrieval_item['corpus_name']} "
                        f"doesn't match {self._source_corpus_name}."
                    )

                if (  # This was changed post-hoc to include both conditions.
                    retrieval_item["title"] in selected_titles and retrieval_item["paragraph_text"] in selected_paras
                ):
                    continue

                selected_titles.append(retrieval_item["title"])
                selected_paras.append(retrieval_item["paragraph_text"])
                unique_retrieval.append(retrieval_item)
        else:
            raise Exception("Retrieval request did not succeed.")

        return unique_retrieval
