"""llm_backend"""
