"""Report writers, all derived from evidence and all passing through `dayzero.redact`.

- `acceptance`: the acceptance table (Markdown and HTML) with Verified/Failed/Stale/... badges;
- `allure_cell`: one cell's Allure story (labels, parameters, links, attachments, category);
- `allure_env`: run-level Allure files (environment, executor, categories);
- `allure_build`: `dayzero report`, the single-file Allure 3 HTML report with history;
- `plots`: the SVG charts attached to each cell;
- `nightly`: night-over-night comparison and the nightly run;
"""
