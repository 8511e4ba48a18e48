"""ASearcher's local retrieval client, from inclusionAI/ASearcher at commit 813e804fc3b24b661b4f5625c77343d5daa14a03
(AReaL, Apache License 2.0): AReaL/ASearcher/utils/search_utils.py, lines 50-103, `AsyncSearchBrowserClient`'s
`query_async` and `access_async` as they are, in a class whose `server_addr` is given (the release reads the
servers' addresses from files under $RAG_SERVER_ADDR_DIR, `get_server_list`, lines 36-48, left out). Its search
tool (AReaL/ASearcher/utils/search_tool.py, lines 46-50) sends `{"queries": [query], "topk", "return_scores":
False}` and reads `documents` and `urls`; an `<access>` sends `[url]` and reads `page`.
"""
import asyncio
import random
from typing import Any, Dict, List

import aiohttp


class AsyncSearchBrowserClient:
    def __init__(self, server_addr):
        self.server_addr = server_addr
        self.server_list = [server_addr]

    def get_server_list(self):
        return self.server_list

    async def query_async(self, req_meta: Dict[str, Any]) -> List[Dict]:
        cnt = 0
        last_exception = None
        while cnt < 10:
            try:
                async with aiohttp.ClientSession() as session:
                    async with session.post(
                        f"http://{self.server_addr}/retrieve",
                        json=req_meta,
                        timeout=aiohttp.ClientTimeout(total=120, sock_connect=120)
                    ) as response:
                        response.raise_for_status()
                        res = await response.json()
                        return [
                            dict(
                                documents=[r["contents"] for r in result],
                                urls=[r["url"] for r in result],
                                server_type="async-search-browser",
                            ) for result in res["result"]
                        ]
            except Exception as e:
                print("query_async", self.server_list, e.__class__.__name__, e.__cause__)
                last_exception = e
                self.server_list = self.get_server_list()
                self.server_addr = random.choice(self.server_list)
                print(f"Search Engine switched to {self.server_addr}")
                cnt += 1
                await asyncio.sleep(10)

        raise RuntimeError("Fail to post search query to RAG server") from last_exception

    async def access_async(self, urls: List[str]) -> List[Dict]:
        cnt = 0
        last_exception = None        
        while cnt < 10:
            try:
                async with aiohttp.ClientSession() as session:
                    async with session.post(
                        f"http://{self.server_addr}/access",
                        json={"urls": urls},
                        timeout=aiohttp.ClientTimeout(total=120, sock_connect=120)
                    ) as response:
                        response.raise_for_status()
                        res = await response.json()
                        return [
                            dict(
                                page=result["contents"] if result is not None else "",
                                type="access",
                                server_type="async-search-browser",
                            ) for result in res["result"]
                        ]
            except Exception as e:
                print("access_async", self.server_list, e)
                last_exception = e
