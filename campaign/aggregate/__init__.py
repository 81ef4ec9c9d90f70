"""aggregate"""
