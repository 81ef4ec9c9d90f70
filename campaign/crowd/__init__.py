"""crowd"""
