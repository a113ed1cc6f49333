"""Report writers: acceptance table (and, later, the Allure HTML report)."""
