"""rocketq.admin"""
