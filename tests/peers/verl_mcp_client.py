"""verl's MCP search tool's reading of a tool's result, from volcengine/verl at commit
b178a3cd56f58b2d502255daba591e92833930a7 (Apache License 2.0): verl/tools/mcp_search_tool.py, `MCPSearchTool.
_parse_tool_result` (lines 32-69) as a function (`self` was not used). verl's client (verl/tools/utils/mcp_clients/
McpClientManager.py) connects through fastmcp's `SSETransport` with `Authorization: Bearer TOKEN` and calls the tool
named in its config's `tool_selected_list`; the tests connect with the MCP SDK's own SSE client and that header.
"""
import json
import logging
import re

logger = logging.getLogger(__name__)


def _parse_tool_result(content: list) -> tuple[str, dict]:
    res = ""
    res_cnt = 0
    query_list = []
    metadata = {
        "api_request_error": "",
        "status": "unknown",
        "total_results": 0,
    }
    try:
        for part in content:
            if part.type != "text":
                continue
            text = part.text.replace("'", '"')
            query_match = re.search(r'query"\s*:\s*"([^"]+)"', text)
            query = query_match.group(1) if query_match else ""
            query_list.append(query)

            title_matches = re.findall(r'"title"\s*:', text)
            title_count = len(title_matches)

            results_match = re.search(r'"results"\s*:\s*(\[.*?\])', text, re.DOTALL)
            results_content = results_match.group(1) if results_match else ""

            res += results_content
            res_cnt += title_count
    except json.JSONDecodeError:
        err_msg = "json parse error."
        logger.error(err_msg)
        metadata["api_request_error"] = err_msg
        metadata["status"] = "error"

    # update metadata
    metadata["status"] = "success"
    metadata["queries"] = query_list
    metadata["query_count"] = len(query_list)
    metadata["total_results"] = res_cnt
    return res, metadata
